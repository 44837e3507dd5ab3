# boxbroker in a container: a static binary on an empty image, with the CA
# certificates, run as a non-root user, its data in a volume.
#
#   docker build -t boxbroker .
#   docker run -d -p 127.0.0.1:8787:8787 -v boxbroker-data:/data boxbroker
#   docker run --rm -i -v boxbroker-data:/data boxbroker box add NAME
#
# Built from a clone, the binary records the commit (`boxbroker version`);
# .dockerignore keeps .git in the context for that.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/boxbroker ./cmd/boxbroker \
	&& mkdir -p /out/root/data

FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/boxbroker /usr/local/bin/boxbroker
# /data is copied as an entry of /out/root, so it is the user's own.
COPY --from=build --chown=65532:65532 /out/root/ /
USER 65532:65532
ENV BOXBROKER_DATA=/data \
	BOXBROKER_LISTEN=0.0.0.0:8787 \
	BOXBROKER_ADMIN_LISTEN=127.0.0.1:8788
VOLUME /data
EXPOSE 8787
# Healthy while the broker answers /readyz with 200 on its box-facing
# port (the store answers, the data directory takes a write); unhealthy
# from the moment it begins to stop.
HEALTHCHECK --interval=30s --timeout=10s --start-period=15s --retries=3 \
	CMD ["/usr/local/bin/boxbroker", "ready"]
ENTRYPOINT ["/usr/local/bin/boxbroker"]
CMD ["serve"]
