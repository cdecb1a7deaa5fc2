//! ofproto: the OpenFlow switch above the datapaths.

pub mod openflow;
