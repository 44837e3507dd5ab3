-- 0009: the HTTPS proxy's certificate authority, one per store: its
-- certificate (PEM) and its private key, sealed under the master key.

CREATE TABLE proxy_ca (
	id         integer     NOT NULL PRIMARY KEY CHECK (id = 1),
	cert_pem   bytea       NOT NULL,
	sealed_key bytea       NOT NULL,
	created_at timestamptz NOT NULL
);
