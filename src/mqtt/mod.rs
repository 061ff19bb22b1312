//! MQTT: the topic grammar and command validation (plain logic, no IO), the
//! session that owns the rumqttc client ([`Link`]), and a small embedded
//! broker for boxes without one ([`Broker`]).

pub mod broker;
pub mod command;
pub mod link;
pub mod topics;

pub use broker::Broker;
pub use command::{parse, Command, CommandError, CommandLimits, SourceCommand};
pub use link::{Link, LinkSettings, Message, Outbox};
pub use topics::{TopicError, Topics};
