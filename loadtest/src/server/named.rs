//! The actions of one API the server implements, as a fixed list of named values: finding
//! one by its name and its position in the list (the index of its call counter).

/// A value of a fixed list, each with a name of its own.
pub(crate) trait Named: Copy + PartialEq + 'static {
    /// Every value, in the order of their counters.
    fn all() -> &'static [Self];

    /// The value's name.
    fn name_of(self) -> &'static str;

    /// The value named `name`, when there is one.
    fn from_name(name: &str) -> Option<Self> {
        Self::all()
            .iter()
            .copied()
            .find(|value| value.name_of() == name)
    }

    /// The value's position in [`all`](Self::all).
    fn index(self) -> usize {
        Self::all()
            .iter()
            .position(|value| *value == self)
            .unwrap_or_default()
    }
}
