"""The network layer: the I/O loop (epoll), connections and their handshakes (TLS, ApiVersions,
SASL), the network client and the cluster metadata. It imports the protocol and wire layers below
it, never the producer or the API above it (docs/internals.md, "Layers")."""
