//! How many reports (a Warning Event, a log line) of a namespace's unindexed release Secrets are
//! written: whoever may create Secrets in a namespace decides how many of them are refused
//! (over its bound, too large, naming another namespace), and each report is a write to the API
//! server or a line in the log. A namespace is reported on at most [`ReportBudget::burst`] times
//! a window; the rest are only counted, to be told as one summary.

use std::collections::HashMap;

/// The reports left to a namespace in the current window, and those held back since its last
/// summary.
#[derive(Debug, Default)]
struct Spent {
    window: u64,
    written: u32,
    held_back: u64,
}

/// A per-namespace budget of reports: at most `burst` in each window of `window_seconds`.
#[derive(Debug)]
pub struct ReportBudget {
    burst: u32,
    window_seconds: u64,
    spent: HashMap<String, Spent>,
}

impl ReportBudget {
    /// Ten reports a namespace a minute: enough for an operator to see what happens and which
    /// Secrets, never one API write per Secret a tenant writes.
    pub fn per_minute() -> Self {
        Self::new(10, 60)
    }

    pub fn new(burst: u32, window_seconds: u64) -> Self {
        ReportBudget {
            burst: burst.max(1),
            window_seconds: window_seconds.max(1),
            spent: HashMap::new(),
        }
    }

    /// The reports each namespace may write in a window.
    pub fn burst(&self) -> u32 {
        self.burst
    }

    /// Whether a report on `namespace` at `now` (Unix seconds) is written; one that is not is
    /// counted, for [`held_back`](Self::held_back).
    pub fn allow(&mut self, namespace: &str, now: u64) -> bool {
        let window = now / self.window_seconds;
        let spent = match self.spent.get_mut(namespace) {
            Some(spent) => spent,
            None => self.spent.entry(namespace.to_string()).or_default(),
        };
        if spent.window != window {
            spent.window = window;
            spent.written = 0;
        }
        if spent.written < self.burst {
            spent.written += 1;
            true
        } else {
            spent.held_back += 1;
            false
        }
    }

    /// The reports on `namespace` held back since this was last asked (for a summary), and
    /// forgets them.
    pub fn held_back(&mut self, namespace: &str) -> u64 {
        self.spent
            .get_mut(namespace)
            .map_or(0, |spent| std::mem::take(&mut spent.held_back))
    }

    /// Every namespace with reports held back since its last summary, and how many: each
    /// forgotten once told.
    pub fn take_held_back(&mut self) -> Vec<(String, u64)> {
        let mut held: Vec<(String, u64)> = self
            .spent
            .iter_mut()
            .filter(|(_, spent)| spent.held_back > 0)
            .map(|(namespace, spent)| (namespace.clone(), std::mem::take(&mut spent.held_back)))
            .collect();
        held.sort();
        held
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_namespace_is_reported_on_at_most_its_burst_a_window_and_the_rest_are_counted() {
        let mut budget = ReportBudget::new(3, 60);
        let allowed = (0..10).filter(|_| budget.allow("tenant", 120)).count();
        assert_eq!(allowed, 3);
        // Another namespace has its own budget.
        assert!(budget.allow("team", 120));
        assert_eq!(budget.take_held_back(), vec![("tenant".to_string(), 7)]);
        // Told once.
        assert_eq!(budget.take_held_back(), vec![]);
        assert_eq!(budget.held_back("tenant"), 0);
    }

    #[test]
    fn the_next_window_starts_a_new_budget() {
        let mut budget = ReportBudget::new(2, 60);
        assert!(budget.allow("tenant", 59));
        assert!(budget.allow("tenant", 59));
        assert!(!budget.allow("tenant", 59));
        assert!(budget.allow("tenant", 60));
        assert!(budget.allow("tenant", 119));
        assert!(!budget.allow("tenant", 119));
        assert_eq!(budget.held_back("tenant"), 2);
    }

    #[test]
    fn a_budget_of_nothing_still_reports_once_a_window() {
        let mut budget = ReportBudget::new(0, 0);
        assert_eq!(budget.burst(), 1);
        assert!(budget.allow("tenant", 5));
        assert!(!budget.allow("tenant", 5));
        assert!(budget.allow("tenant", 6));
    }
}
