# skein-controller (one voter of the metadata quorum) as a FROM scratch image: the static
# binary (CGO_ENABLED=0) and an empty /data owned by the unprivileged user it
# runs as, so a named volume mounted there is writable. `make images` builds
# it from a context holding only bin/skein-controller and that empty directory.
FROM scratch
COPY --chown=65532:65532 data /data
COPY skein-controller /skein-controller
USER 65532:65532
ENV SKEIN_DATA_DIR=/data
# The Go runtime's monitor thread keeps its own tick rather than being woken
# at each burst of work (docs/OPERATIONS.md, "Many processes on few cores");
# GODEBUG=schedtrace=0 gives Go's default back.
ENV GODEBUG=schedtrace=2147483647
EXPOSE 9093 9193 9293 7946 7946/udp
ENTRYPOINT ["/skein-controller"]
