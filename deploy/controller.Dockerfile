# skein-controller (one voter of the metadata quorum) as a FROM scratch image: the static
# binary (CGO_ENABLED=0) and an empty /data owned by the unprivileged user it
# runs as, so a named volume mounted there is writable. `make images` builds
# it from a context holding only bin/skein-controller and that empty directory.
FROM scratch
COPY --chown=65532:65532 data /data
COPY skein-controller /skein-controller
USER 65532:65532
ENV SKEIN_DATA_DIR=/data
EXPOSE 9093 9193 9293 7946 7946/udp
ENTRYPOINT ["/skein-controller"]
