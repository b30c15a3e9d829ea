# skein-gateway (the public REST and gRPC API) as a FROM scratch image: just
# the static binary (CGO_ENABLED=0). The gateway keeps no durable state, so it
# has no data directory. `make images` builds it from a context holding only
# bin/skein-gateway.
FROM scratch
COPY skein-gateway /skein-gateway
USER 65532:65532
# The Go runtime's monitor thread keeps its own tick rather than being woken
# at each burst of work (docs/OPERATIONS.md, "Many processes on few cores");
# GODEBUG=schedtrace=0 gives Go's default back.
ENV GODEBUG=schedtrace=2147483647
EXPOSE 8080 9090
ENTRYPOINT ["/skein-gateway"]
