# skein-txncoord (a transaction coordinator) as a FROM scratch image: just the
# static binary (CGO_ENABLED=0). Its state lives in __transaction_state on the
# storage nodes, so it has no data directory. `make images` builds it from a
# context holding only bin/skein-txncoord.
FROM scratch
COPY skein-txncoord /skein-txncoord
USER 65532:65532
# The Go runtime's monitor thread keeps its own tick rather than being woken
# at each burst of work (docs/OPERATIONS.md, "Many processes on few cores");
# GODEBUG=schedtrace=0 gives Go's default back.
ENV GODEBUG=schedtrace=2147483647
EXPOSE 9601 9611 7946 7946/udp
ENTRYPOINT ["/skein-txncoord"]
