//! The lock policy as it is now: the configuration the server started with (flags, environment,
//! `--config`), with the switches an operator flips while it runs applied over it.
//!
//! The switches live in a ConfigMap the running replicas watch (`--switches-configmap`, the
//! chart's `<fullname>-switches`): `mode` (deny, warn, repair, off: the default mode, as `--mode`)
//! and `revert` (`false` pauses the drift reverter, `true` lets it run again if the server
//! started with it). They act within a second on every running replica, ready or not, with no
//! new pod: in an incident where new pods cannot become ready, `mode: off` still lands.
//!
//! Writer rules are live too: those of the writers ConfigMap (`--writers-configmap`,
//! [`crate::source::writer_rules`]) are added to the configuration's own `writers`, and the
//! configuration is swapped whole when either changes.

use std::collections::BTreeMap;
use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::core::{Config, Mode, WriterRule, WriterRuleError as RuleError};

/// The switches a ConfigMap sets; `None` leaves the started configuration's value.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Switches {
    pub mode: Option<Mode>,
    pub revert: Option<bool>,
}

/// A switch the ConfigMap sets that is not one, or to a value it cannot take.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum InvalidSwitch {
    #[error("mode: {0:?} is not one of deny, warn, repair, off")]
    Mode(String),
    #[error("revert: {0:?} is not true or false")]
    Revert(String),
    #[error("{0}: not a switch (mode, revert)")]
    Unknown(String),
}

/// The switches of a ConfigMap's data; an unknown key or value is an error naming it, and then
/// none of them is applied (a half-read switch board is worse than the previous one).
pub(crate) fn parse_switches(data: &BTreeMap<String, String>) -> Result<Switches, InvalidSwitch> {
    let mut switches = Switches::default();
    for (key, value) in data {
        let value = value.trim();
        match key.as_str() {
            "mode" => {
                switches.mode = Some(
                    value
                        .parse()
                        .map_err(|_| InvalidSwitch::Mode(value.to_string()))?,
                );
            }
            "revert" => {
                switches.revert = Some(match value {
                    "true" => true,
                    "false" => false,
                    _ => return Err(InvalidSwitch::Revert(value.to_string())),
                });
            }
            other => return Err(InvalidSwitch::Unknown(other.to_string())),
        }
    }
    Ok(switches)
}

/// The configuration in force: `base` with `switches` over it. `revert: true` cannot start a
/// reverter the server was started without (its grant comes with the chart's `revert.enabled`).
pub(crate) fn switched(base: &Config, switches: &Switches) -> Config {
    let mut config = base.clone();
    if let Some(mode) = switches.mode {
        config.mode = mode;
    }
    if let Some(revert) = switches.revert {
        config.ownership_returned = base.ownership_returned && revert;
    }
    config
}

/// The configuration in force, swapped whole when a switch flips or the live writer rules
/// change; readers never wait.
pub(crate) struct LiveConfig {
    base: Config,
    current: ArcSwap<Config>,
    changes: tokio::sync::watch::Sender<u64>,
    /// What is put over `base`: the switches and the live writer rules last read.
    live: std::sync::Mutex<(Switches, Vec<WriterRule>)>,
}

impl LiveConfig {
    pub(crate) fn new(base: Config) -> Self {
        LiveConfig {
            current: ArcSwap::from_pointee(base.clone()),
            base,
            changes: tokio::sync::watch::channel(0).0,
            live: std::sync::Mutex::new((Switches::default(), Vec::new())),
        }
    }

    /// Replaces the live writer rules (the writers ConfigMap's); returns what is in force now
    /// and the rules refused beside the configuration's own (an id it already uses: the
    /// configuration's rule stays).
    pub(crate) fn apply_rules(&self, rules: Vec<WriterRule>) -> (Arc<Config>, Vec<RuleError>) {
        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        live.1 = rules;
        let (config, refused) = self.rebuild(&live);
        (config, refused)
    }

    fn rebuild(
        &self,
        (switches, rules): &(Switches, Vec<WriterRule>),
    ) -> (Arc<Config>, Vec<RuleError>) {
        let mut config = switched(&self.base, switches);
        let mut refused = Vec::new();
        if !rules.is_empty() {
            let all = self.base.writers.iter().chain(rules).cloned().collect();
            let (writers, bad) = crate::core::validate_rules(all);
            config.writers = writers;
            refused = bad;
        }
        let config = Arc::new(config);
        self.current.store(config.clone());
        self.changes.send_modify(|n| *n += 1);
        (config, refused)
    }

    /// The configuration in force now.
    pub(crate) fn load(&self) -> Arc<Config> {
        self.current.load_full()
    }

    /// Puts `switches` over the started configuration; returns what is in force now.
    pub(crate) fn apply(&self, switches: &Switches) -> Arc<Config> {
        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        live.0 = switches.clone();
        self.rebuild(&live).0
    }

    /// Hears of every change.
    pub(crate) fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn switches_are_read_whole_or_not_at_all() {
        assert_eq!(
            parse_switches(&data(&[("mode", "off\n"), ("revert", "false")])),
            Ok(Switches {
                mode: Some(Mode::Off),
                revert: Some(false)
            })
        );
        assert_eq!(parse_switches(&data(&[])), Ok(Switches::default()));
        let bad = parse_switches(&data(&[("mode", "allow")])).unwrap_err();
        assert!(bad.to_string().contains("\"allow\""), "{bad}");
        assert!(parse_switches(&data(&[("revert", "no")])).is_err());
        assert!(parse_switches(&data(&[("mdoe", "off")]))
            .unwrap_err()
            .to_string()
            .contains("mdoe"));
    }

    #[test]
    fn a_switch_overrides_the_started_mode_and_pauses_but_never_starts_the_reverter() {
        let base = Config {
            mode: Mode::Deny,
            ownership_returned: true,
            ..Config::default()
        };
        let live = LiveConfig::new(base.clone());
        let changes = live.subscribe();
        let off = live.apply(&Switches {
            mode: Some(Mode::Off),
            revert: Some(false),
        });
        assert_eq!((off.mode, off.ownership_returned), (Mode::Off, false));
        assert!(changes.has_changed().unwrap());
        assert_eq!(live.load().mode, Mode::Off);
        // Emptied: back to how it started.
        let back = live.apply(&Switches::default());
        assert_eq!((back.mode, back.ownership_returned), (Mode::Deny, true));
        // A server started without the reverter cannot be switched into one.
        let without = Config {
            ownership_returned: false,
            ..base
        };
        let on = switched(
            &without,
            &Switches {
                mode: None,
                revert: Some(true),
            },
        );
        assert!(!on.ownership_returned);
    }

    fn rule(id: &str) -> WriterRule {
        serde_saphyr::from_str(&format!("id: {id}\nwriters: {{serviceAccounts: [ops/scaler]}}\nobjects: {{kind: Deployment, group: apps}}\npaths: [/spec/replicas]\nreason: r\n")).unwrap()
    }

    #[test]
    fn live_rules_join_the_configurations_own_and_go_when_removed() {
        let base = Config {
            writers: vec![rule("from-config")],
            ..Config::default()
        };
        let live = LiveConfig::new(base);
        let changes = live.subscribe();
        let (config, refused) = live.apply_rules(vec![rule("from-map"), rule("from-config")]);
        let ids: Vec<&str> = config.writers.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["from-config", "from-map"]);
        // The map's rule with the configuration's id is refused; the configuration's stays.
        assert_eq!(refused.len(), 1);
        assert!(changes.has_changed().unwrap());
        // A switch flipped keeps the live rules.
        let switched = live.apply(&Switches {
            mode: Some(Mode::Warn),
            revert: None,
        });
        assert_eq!(switched.writers.len(), 2);
        let (config, _) = live.apply_rules(vec![]);
        let ids: Vec<&str> = config.writers.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["from-config"]);
        assert_eq!(config.mode, Mode::Warn);
    }
}
