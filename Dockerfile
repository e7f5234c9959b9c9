# The one Nestlet image: every command of cmd/ (nestlet, nestlet-scheduler,
# nestlet-proxy, nestctl) under /usr/local/bin, on distroless as the
# "nonroot" user (65532). The chart (charts/nestlet) runs each component
# from it with an explicit command.
#
#   docker build -t ghcr.io/nestlet/nestlet:dev .
#
# Not built by CI: the project's machines have no Docker engine. `make
# images` (hack/images.sh) builds the same image without Docker, and
# reproducibly; hack/kind-up.sh builds this one for kind clusters.

FROM golang:1.25 AS build
WORKDIR /src
# Modules first, so that a source change does not download them again.
COPY go.mod go.sum ./
COPY third_party/ third_party/
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "-s -w" -o /out/ ./cmd/...

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/ /usr/local/bin/
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/nestlet"]
