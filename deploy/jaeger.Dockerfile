# A local stand-in for the published Jaeger v2 all-in-one image, for machines
# that cannot pull it: the same entrypoint path, listen-host variable and user
# as the published image, around a static binary built from the Go module
# proxy (tools/jaeger). `make jaeger-image` tags it with the published name,
# so docker-compose.yml names one image either way. Built this way Jaeger has
# no web UI (a placeholder page); the query API on 16686 is complete.
FROM scratch
ENV JAEGER_LISTEN_HOST=0.0.0.0
COPY jaeger-linux /cmd/jaeger/jaeger-linux
USER 10001
EXPOSE 4317 4318 5778 5779 9411 13133 14250 14268 16685 16686
ENTRYPOINT ["/cmd/jaeger/jaeger-linux"]
