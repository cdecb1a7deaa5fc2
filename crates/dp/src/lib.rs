//! tunlab's datapath core: flow rules in ovs-ofctl syntax, the classifier
//! that picks a rule for a packet, and the actions.
//!
//! This crate makes no system calls and reads no clock (callers pass time
//! in), so two switches can be driven in memory in tests. It depends only
//! on `tunlab-wire` for packet formats.

pub mod classifier;
pub mod extract;
pub mod field;
pub mod flow;
pub mod key;
pub mod pipeline;

pub use classifier::{Classifier, ExactMatchCache, Rule, RuleRef, Selector};
pub use extract::{extract, extract_tunnel, TlvMap, TlvMapError};
pub use flow::{
    format_flow, parse_flow, Action, FlowError, FlowRule, Match, NumericPorts, PortNames,
    DEFAULT_PRIORITY,
};
pub use key::FlowKey;
pub use pipeline::{
    Continuation, DropReason, FrozenActions, MacTable, Op, PacketIn, PacketInReason, Pipeline,
    TunnelSet,
};
