//! MQTT protocol logic without IO: the topic grammar in one place, and
//! command parsing and validation. The broker connection (rumqttc) will own
//! the IO and call into these.

pub mod command;
pub mod topics;

pub use command::{parse, Command, CommandError, CommandLimits, SourceCommand};
pub use topics::{TopicError, Topics};
