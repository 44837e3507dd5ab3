-- 0009: the HTTPS proxy's certificate authority, one per store: its
-- certificate (PEM) and its private key, sealed under the master key.

CREATE TABLE proxy_ca (
	id         INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
	cert_pem   BLOB    NOT NULL,
	sealed_key BLOB    NOT NULL,
	created_at INTEGER NOT NULL
) STRICT;
