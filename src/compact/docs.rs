//! The docs `search` finds and `fetch` returns: short topic pages shipped with lore.
