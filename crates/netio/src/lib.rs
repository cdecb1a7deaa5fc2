//! tunlab's Linux I/O: tenant ports (TAP with virtio-net headers and
//! offloads), underlay sockets, and the generator's packet rings
//! (AF_PACKET, AF_XDP). The datapath core (`tunlab-dp`) never
//! sees a file descriptor; this crate never decides what to do with a
//! packet.

pub mod cpu;
pub mod netns;
pub mod packet;
pub mod poll;
pub mod ring;
pub mod rst_guard;
pub mod tap;
pub mod udp;
pub mod xdp;

pub use packet::PacketSocket;
pub use poll::Poller;
pub use ring::{FrameRxRing, RxFrame, RxRing, TxRing};
pub use rst_guard::RstGuard;
pub use tap::{Tap, TapError, TapOptions};
pub use udp::{RecvBatch, Underlay};
pub use xdp::{XdpMode, XdpTx};
