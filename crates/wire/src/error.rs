//! Parse and build errors that name the layer, the field and the byte offset.

/// The protocol layer an error belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    Ethernet,
    Vlan,
    Arp,
    Ipv4,
    Ipv6,
    Udp,
    Tcp,
    Icmp,
    Icmpv6,
    Geneve,
    Vxlan,
    Gre,
    Stt,
    /// OpenFlow messages (the switch's management protocol).
    OpenFlow,
    /// A tunnel's configuration (for building outer headers).
    Tunnel,
    Buffer,
}

impl std::fmt::Display for Layer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Layer::Ethernet => "ethernet",
            Layer::Vlan => "802.1Q/802.1ad",
            Layer::Arp => "arp",
            Layer::Ipv4 => "ipv4",
            Layer::Ipv6 => "ipv6",
            Layer::Udp => "udp",
            Layer::Tcp => "tcp",
            Layer::Icmp => "icmp",
            Layer::Icmpv6 => "icmpv6",
            Layer::Geneve => "geneve",
            Layer::Vxlan => "vxlan",
            Layer::Gre => "gre",
            Layer::Stt => "stt",
            Layer::OpenFlow => "openflow",
            Layer::Tunnel => "tunnel",
            Layer::Buffer => "buffer",
        })
    }
}

/// What is wrong with a packet.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ErrorKind {
    /// The packet ends before the field does.
    #[error("{field}: needs {needed} bytes, only {available} available")]
    Truncated {
        field: &'static str,
        needed: usize,
        available: usize,
    },
    /// A field holds a value the specification forbids.
    #[error("{field}: {reason}")]
    Invalid {
        field: &'static str,
        reason: &'static str,
    },
    /// A field holds a value the specification allows but tunlab does not handle.
    #[error("{field}: unsupported value {value:#x}")]
    Unsupported { field: &'static str, value: u32 },
    /// RFC 8926 § 3.5: a critical option the receiver does not know means drop.
    #[error("unknown critical option class {class:#06x} type {typ:#04x}")]
    UnknownCriticalOption { class: u16, typ: u8 },
    /// A checksum did not verify.
    #[error("{field}: bad checksum")]
    Checksum { field: &'static str },
    /// There is no room in the buffer for what is being written.
    #[error("{field}: needs {needed} bytes of room, only {available} available")]
    NoRoom {
        field: &'static str,
        needed: usize,
        available: usize,
    },
}

/// A typed error: layer, what is wrong, and the byte offset where it is.
///
/// Offsets are relative to the slice given to the parser; callers that parse a
/// nested layer shift them with [`Error::at`] so that the final message points
/// into the whole frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{layer}: {kind} (at byte offset {offset})")]
pub struct Error {
    pub layer: Layer,
    pub kind: ErrorKind,
    pub offset: usize,
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    #[cold]
    pub(crate) const fn new(layer: Layer, offset: usize, kind: ErrorKind) -> Error {
        Error {
            layer,
            kind,
            offset,
        }
    }

    /// `field` of `layer`, starting at `offset`, needs `needed` bytes but the
    /// buffer holds `available` from there. Public for decoders that read a
    /// layer more liberally than its parser here (`tunlab decode`).
    #[cold]
    pub const fn truncated(
        layer: Layer,
        field: &'static str,
        offset: usize,
        needed: usize,
        available: usize,
    ) -> Error {
        Error::new(
            layer,
            offset,
            ErrorKind::Truncated {
                field,
                needed,
                available,
            },
        )
    }

    #[cold]
    pub(crate) const fn invalid(
        layer: Layer,
        field: &'static str,
        offset: usize,
        reason: &'static str,
    ) -> Error {
        Error::new(layer, offset, ErrorKind::Invalid { field, reason })
    }

    /// The same error, with its offset moved by `base` bytes (the position of
    /// the layer's first byte in the enclosing frame).
    #[inline]
    pub fn at(mut self, base: usize) -> Error {
        self.offset += base;
        self
    }
}

/// Check that `buf` holds `needed` bytes from `offset`, naming the field if not.
#[inline(always)]
pub(crate) fn need(
    layer: Layer,
    field: &'static str,
    buf: &[u8],
    offset: usize,
    needed: usize,
) -> Result<()> {
    let available = buf.len().saturating_sub(offset);
    if available < needed {
        Err(Error::truncated(layer, field, offset, needed, available))
    } else {
        Ok(())
    }
}
