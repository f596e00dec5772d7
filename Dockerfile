# Builds the robotsgate binary into a minimal image; docker-compose.yml uses it.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/robotsgate . && mkdir -p /out/ca

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/robotsgate /robotsgate
# The CA is created here on first start; mount a volume to keep it.
COPY --from=build --chown=nonroot:nonroot /out/ca /ca
ENV ROBOTSGATE_LISTEN=0.0.0.0:8080 \
    ROBOTSGATE_CA_DIR=/ca \
    ROBOTSGATE_LOG_FORMAT=text
EXPOSE 8080
ENTRYPOINT ["/robotsgate"]
CMD ["serve"]
