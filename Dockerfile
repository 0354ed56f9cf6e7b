# Two stages: build a static binary, ship it alone on distroless, as non-root 65532.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /cmsync .

FROM gcr.io/distroless/static:nonroot
COPY --from=build /cmsync /cmsync
USER 65532:65532
ENTRYPOINT ["/cmsync"]
