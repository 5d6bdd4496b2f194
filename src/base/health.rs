//! How sure a holder can be that it still holds its lock, and what the transitions
//! callback is told.

/// Where a hold stands, as its holder can know it.
///
/// Besides held and lost, a hold can be uncertain: its last renewal failed (Redis did not
/// answer in time, the connection broke) but its validity has not run out, so it may still
/// be held, or may already have been deleted by someone else. A holder that must not act
/// without the lock pauses its side effects while the hold is uncertain, and resumes them
/// when a renewal gets through again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Health {
    /// The last acquisition or renewal reached Redis, and its validity has not run out.
    Held,
    /// The last renewal did not get through, and the validity has not run out: the lock may
    /// or may not still be held.
    Uncertain,
    /// The hold is gone, or its validity ran out without a renewal getting through: someone
    /// else may hold the lock.
    Lost,
}

impl Health {
    /// The least sure of `all`: lost if any is, uncertain if any is, otherwise held.
    pub(crate) fn worst(all: impl IntoIterator<Item = Health>) -> Health {
        all.into_iter()
            .fold(Health::Held, |worst, health| match (worst, health) {
                (Health::Lost, _) | (_, Health::Lost) => Health::Lost,
                (Health::Uncertain, _) | (_, Health::Uncertain) => Health::Uncertain,
                _ => Health::Held,
            })
    }
}

/// A hold's change of [`Health`], as handed to the
/// [`on_health_change`](crate::LockClientBuilder::on_health_change) callback.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HealthChange {
    /// The lock's name (lossily decoded).
    pub name: String,
    /// What the hold was.
    pub from: Health,
    /// What the hold is now.
    pub to: Health,
}
