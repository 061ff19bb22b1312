//! `/metrics`: the figures of `<base>/stats` in Prometheus's text format
//! (version 0.0.4). Plain rendering, no IO.

use super::hub::HubCounters;
use crate::mqtt::StatsMessage;
use crate::stats::Percentiles;
use std::fmt::Write;
use std::sync::atomic::Ordering;

/// Escapes a label value (backslash, quote, newline).
fn label(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

struct Out(String);

impl Out {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP fusiond_{name} {help}\n# TYPE fusiond_{name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &str, value: f64) {
        let labels = if labels.is_empty() { String::new() } else { format!("{{{labels}}}") };
        let _ = writeln!(self.0, "fusiond_{name}{labels} {value}");
    }

    fn one(&mut self, name: &str, kind: &str, help: &str, value: f64) {
        self.family(name, kind, help);
        self.sample(name, "", value);
    }
}

/// The metrics text for the newest `stats` (none yet: only the stream's
/// counters and `up`).
pub fn render(stats: Option<&StatsMessage>, hub: &HubCounters, stream_clients: usize) -> String {
    let mut o = Out(String::new());
    o.one("up", "gauge", "1 while the daemon serves.", 1.0);
    let sent = hub.frames_sent.load(Ordering::Relaxed) as f64;
    o.one("http_stream_frames_sent_total", "counter", "MJPEG frames sent to stream clients.", sent);
    let dropped = hub.dropped_frames.load(Ordering::Relaxed) as f64;
    o.one("http_stream_dropped_frames_total", "counter", "Frames a slow stream client skipped.", dropped);
    o.one("http_stream_clients", "gauge", "MJPEG stream clients connected.", stream_clients as f64);
    if let Some(s) = stats {
        counters(&mut o, s);
        latency(&mut o, s);
        models(&mut o, s);
    }
    o.0
}

fn counters(o: &mut Out, s: &StatsMessage) {
    let counters = [
        ("frames_captured_total", "Frames the camera delivered.", s.frames_captured),
        ("frames_processed_total", "Frames through the pipeline.", s.frames_processed),
        ("detections_total", "Full detections run.", s.detections),
        ("dropped_frames_total", "Camera frames replaced before processing (newest wins).", s.dropped_frames),
        ("mqtt_dropped_frames_total", "Frames the MQTT session dropped.", s.dropped_publish_frames),
        ("mqtt_dropped_messages_total", "Messages the MQTT queue dropped.", s.dropped_messages),
        ("dropped_commands_total", "Commands refused as busy (queue full), each answered.", s.dropped_commands),
        ("coalesced_commands_total", "Waiting reload/source commands a newer one replaced.", s.coalesced_commands),
        ("mqtt_connects_total", "MQTT (re)connections.", s.mqtt_connects),
        ("v4l2_frames_written_total", "Fused frames written to the V4L2 output.", s.v4l2_frames_written),
        ("v4l2_dropped_frames_total", "Fused frames the V4L2 output replaced unwritten.", s.v4l2_dropped_frames),
    ];
    for (name, help, v) in counters {
        o.one(name, "counter", help, v as f64);
    }
    o.one("uptime_seconds", "gauge", "Seconds since start.", s.uptime_s as f64);
    o.one("capture_fps", "gauge", "Camera frames per second.", s.capture_fps);
    o.one("processed_fps", "gauge", "Processed frames per second.", s.processed_fps);
    o.one("rss_bytes", "gauge", "Resident memory.", s.rss_bytes as f64);
    o.one("peak_rss_bytes", "gauge", "Peak resident memory.", s.peak_rss_bytes as f64);
    o.family("camera_streaming", "gauge", "1 while the camera streams, 0 while it is lost.");
    o.sample("camera_streaming", "", if s.camera == "streaming" { 1.0 } else { 0.0 });
    o.family("v4l2_output_up", "gauge", "1 while the V4L2 output writes, 0 while it is lost or off.");
    o.sample("v4l2_output_up", "", if s.v4l2_output == "writing" { 1.0 } else { 0.0 });
    o.family("tier_info", "gauge", "The quality tier that runs.");
    o.sample("tier_info", &format!("tier=\"{}\",version=\"{}\"", label(&s.tier), label(s.version)), 1.0);
}

fn latency(o: &mut Out, s: &StatsMessage) {
    let l = &s.latency_ms;
    let stages: [(&str, &Option<Percentiles>); 9] = [
        ("detect", &l.detect),
        ("swap", &l.swap),
        ("paste", &l.paste),
        ("enhance", &l.enhance),
        ("color", &l.color),
        ("mouth", &l.mouth),
        ("pipeline", &l.pipeline),
        ("encode", &l.encode),
        ("capture_to_publish", &l.capture_to_publish),
    ];
    o.family("latency_seconds", "summary", "Per-stage latency over the last frames.");
    for (stage, p) in stages {
        if let Some(p) = p {
            o.sample("latency_seconds", &format!("stage=\"{stage}\",quantile=\"0.5\""), f64::from(p.p50_ms) / 1e3);
            o.sample("latency_seconds", &format!("stage=\"{stage}\",quantile=\"0.95\""), f64::from(p.p95_ms) / 1e3);
        }
    }
}

fn models(o: &mut Out, s: &StatsMessage) {
    o.family("model_info", "gauge", "Each loaded model, with where it runs.");
    for m in &s.models {
        let p = &m.placement;
        let labels = format!(
            "model=\"{}\",engine=\"{}\",providers=\"{}\",zero_copy=\"{}\"",
            label(&m.name),
            label(p.engine),
            label(&p.providers.join(",")),
            p.zero_copy
        );
        o.sample("model_info", &labels, 1.0);
    }
    o.family("model_file_bytes", "gauge", "Each loaded model's file size.");
    for m in &s.models {
        o.sample("model_file_bytes", &format!("model=\"{}\"", label(&m.name)), m.file_bytes as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mqtt::LatencyReport;

    fn stats() -> StatsMessage {
        StatsMessage {
            version: "0.1.0",
            uptime_s: 5,
            tier: "fa\"st".into(),
            camera: "streaming",
            capture_fps: 15.0,
            processed_fps: 14.5,
            frames_captured: 75,
            frames_processed: 70,
            detections: 35,
            dropped_frames: 5,
            dropped_publish_frames: 0,
            dropped_messages: 0,
            dropped_commands: 0,
            coalesced_settings: 0,
            mqtt_connects: 1,
            http_dropped_frames: 0,
            http_stream_clients: 0,
            v4l2_output: "off",
            coalesced_commands: 0,
            v4l2_frames_written: 0,
            v4l2_dropped_frames: 0,
            latency_ms: LatencyReport {
                capture_to_publish: Some(Percentiles { p50_ms: 40.0, p95_ms: 60.0 }),
                ..LatencyReport::default()
            },
            rss_bytes: 1 << 27,
            peak_rss_bytes: 1 << 28,
            models: Vec::new(),
            models_cached: Vec::new(),
        }
    }

    #[test]
    fn every_sample_belongs_to_a_typed_family_and_labels_are_escaped() {
        let text = render(Some(&stats()), &HubCounters::default(), 2);
        assert!(text.contains("fusiond_frames_processed_total 70\n"), "{text}");
        assert!(text.contains("fusiond_latency_seconds{stage=\"capture_to_publish\",quantile=\"0.95\"} 0.06"));
        assert!(text.contains("tier=\"fa\\\"st\""), "{text}");
        assert!(text.contains("fusiond_http_stream_clients 2\n"));
        let typed: Vec<&str> =
            text.lines().filter_map(|l| l.strip_prefix("# TYPE ")).map(|l| l.split(' ').next().unwrap()).collect();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let name = line.split(['{', ' ']).next().unwrap();
            assert!(typed.contains(&name), "{name} has no # TYPE");
        }
    }

    #[test]
    fn before_the_first_stats_only_the_stream_and_up_are_there() {
        let text = render(None, &HubCounters::default(), 0);
        assert!(text.contains("fusiond_up 1\n") && !text.contains("frames_captured"), "{text}");
    }
}
