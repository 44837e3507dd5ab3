-- 0011: the proxy CA a rotation made, which signs in the current one's
-- place from next_from on: its certificate (PEM) and its sealed key.
-- NULL while no rotation is pending.

ALTER TABLE proxy_ca ADD COLUMN next_cert_pem BLOB;
ALTER TABLE proxy_ca ADD COLUMN next_sealed_key BLOB;
ALTER TABLE proxy_ca ADD COLUMN next_from INTEGER;
