//! The host API over one device: [`Device`] (its loaded modules and its launches), its
//! memory ([`buffer`]) and its streams, events, graphs and page-locked buffers ([`stream`]).

pub(crate) mod buffer;
pub mod collective;
mod device;
pub mod profile;
mod queue;
pub(crate) mod stream;
pub mod tensor_map;

pub use device::{Device, LaunchReport};
