//! The slowdown faults in force on one mechanism (a database's `slow`, a Redis server's
//! `cpu_throttle`): each starts and ends on its own, and the slowest in force holds.

/// Slowdowns in thousandths: 1000 is full speed, 4000 four times slower.
///
/// Invariant: [`Slowdowns::permille`] is the largest of those in force, or 1000 with none.
#[derive(Clone, Debug)]
pub struct Slowdowns {
    /// In the order they started. Bound: one per fault of the scenario.
    in_force: Vec<u32>,
    permille: u32,
}

impl Default for Slowdowns {
    fn default() -> Self {
        Slowdowns {
            in_force: Vec::new(),
            permille: 1000,
        }
    }
}

impl Slowdowns {
    /// How many times slower, in thousandths, the slowest in force (1000 with none).
    pub fn permille(&self) -> u32 {
        self.permille
    }

    pub fn at_full_speed(&self) -> bool {
        self.permille == 1000
    }

    /// A slowdown of `permille` starts (`on`) or ends; an end ends one of that size.
    pub fn set(&mut self, permille: u32, on: bool) {
        if on {
            self.in_force.push(permille);
        } else if let Some(at) = self.in_force.iter().position(|&s| s == permille) {
            self.in_force.remove(at);
        }
        self.permille = self.in_force.iter().copied().max().unwrap_or(1000);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slowest_in_force_holds_and_each_ends_on_its_own() {
        let mut slowdowns = Slowdowns::default();
        assert!(slowdowns.at_full_speed());
        slowdowns.set(2000, true);
        slowdowns.set(4000, true);
        assert_eq!(slowdowns.permille(), 4000);
        slowdowns.set(4000, false);
        assert_eq!(slowdowns.permille(), 2000, "the other still holds");
        slowdowns.set(2000, false);
        assert!(slowdowns.at_full_speed());
        slowdowns.set(3000, false);
        assert!(
            slowdowns.at_full_speed(),
            "an end of none in force changes nothing"
        );
    }
}
