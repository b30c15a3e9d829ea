# skein-groupcoord (a group coordinator) as a FROM scratch image: just the
# static binary (CGO_ENABLED=0). Its state lives in __consumer_offsets on the
# storage nodes, so it has no data directory. `make images` builds it from a
# context holding only bin/skein-groupcoord.
FROM scratch
COPY skein-groupcoord /skein-groupcoord
USER 65532:65532
# The Go runtime's monitor thread keeps its own tick rather than being woken
# at each burst of work (docs/OPERATIONS.md, "Many processes on few cores");
# GODEBUG=schedtrace=0 gives Go's default back.
ENV GODEBUG=schedtrace=2147483647
EXPOSE 9501 9511 7946 7946/udp
ENTRYPOINT ["/skein-groupcoord"]
