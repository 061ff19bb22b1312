//! MQTT: the topic grammar and command validation (plain logic, no IO), the
//! typed payloads fusiond publishes ([`payload`]), the session that owns the
//! rumqttc client ([`Link`]) and the Home Assistant discovery config
//! ([`discovery`]). Nothing outside this module names rumqttc. fusiond
//! embeds no broker: the box runs mosquitto.

mod caps;
pub mod command;
pub mod discovery;
pub mod link;
mod outbox;
pub mod payload;
mod tls;
pub mod topics;

pub use caps::PayloadCaps;
pub use command::{parse, Command, CommandError, CommandLimits, SourceCommand};
pub use link::{Link, LinkSettings};
pub use outbox::{LinkCounters, Message, Outbox};
pub use payload::{
    Event, FaceOut, FacesMessage, LatencyReport, ModelStats, SourceState, Stage, StatsMessage, TimingsOut,
};
pub use tls::{ClientIdentity, TlsError, TlsSettings};
pub use topics::{TopicError, Topics};
