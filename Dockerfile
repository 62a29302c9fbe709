# telesrv in a container. It runs scripts/install.sh, the install procedure .ci/run
# tests, so the image holds what CI checked. With compose.yaml it talks to its own
# PostgreSQL and Redis; alone it starts the embedded ones under /var/lib/telesrv.
FROM python:3.12-slim-bookworm

WORKDIR /opt/telesrv
COPY pyproject.toml README.md ./
COPY scripts ./scripts
COPY src ./src
RUN scripts/install.sh /opt/telesrv/.venv \
    && useradd --system --home-dir /var/lib/telesrv --create-home --shell /usr/sbin/nologin telesrv

# PostgreSQL (embedded or not) refuses to run as root; the data belongs to telesrv.
USER telesrv
ENV PATH=/opt/telesrv/.venv/bin:$PATH \
    TELESRV_DATA_DIR=/var/lib/telesrv/data \
    TELESRV_LISTEN=0.0.0.0:8443 \
    TELESRV_WS_LISTEN=0.0.0.0:8444 \
    TELESRV_METRICS_LISTEN=0.0.0.0:9100
VOLUME ["/var/lib/telesrv"]
EXPOSE 8443 8444 9100

# `docker run IMAGE check` validates the configuration instead of serving.
ENTRYPOINT ["telesrv"]
CMD ["serve"]
