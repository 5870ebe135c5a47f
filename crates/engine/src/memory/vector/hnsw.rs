//! The HNSW graph (Malkov & Yashunin, 2016): level draws, layer search, neighbour selection
//! by the paper's heuristic, and linking a new node.

use std::collections::BinaryHeap;

use super::index::{Scored, TopK, VectorIndex};

/// Levels stop here (with m = 16 a level above 5 is expected once per million nodes).
pub(super) const MAX_LEVEL: u8 = 16;

/// Node ids seen during one layer search.
struct Visited(Vec<u64>);

impl Visited {
    fn new(n: usize) -> Self {
        Self(vec![0; n.div_ceil(64)])
    }

    /// Marks `id`; true when it was not marked yet.
    #[inline]
    fn insert(&mut self, id: u32) -> bool {
        let (word, bit) = (id as usize / 64, 1u64 << (id % 64));
        let fresh = self.0[word] & bit == 0;
        self.0[word] |= bit;
        fresh
    }
}

impl VectorIndex {
    /// SplitMix64.
    fn next_random(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A new node's top layer: P(level ≥ l) = m^-l, the paper's distribution with
    /// mL = 1/ln(m), drawn with integers only so every platform builds the same graph.
    pub(super) fn random_level(&mut self) -> u8 {
        let threshold = u64::MAX / self.m as u64;
        let mut level = 0;
        while level < MAX_LEVEL && self.next_random() < threshold {
            level += 1;
        }
        level
    }

    /// The whole links record `[count, links…]` of `id` on `layer`.
    #[inline]
    fn record(&self, id: u32, layer: u8) -> &[u32] {
        if layer == 0 {
            self.links0.get(id as usize)
        } else {
            let start =
                self.upper_start[id as usize] as usize + (usize::from(layer) - 1) * (self.m + 1);
            &self.upper[start..start + self.m + 1]
        }
    }

    fn record_mut(&mut self, id: u32, layer: u8) -> &mut [u32] {
        if layer == 0 {
            self.links0.get_mut(id as usize)
        } else {
            let start =
                self.upper_start[id as usize] as usize + (usize::from(layer) - 1) * (self.m + 1);
            &mut self.upper[start..start + self.m + 1]
        }
    }

    /// The links of `id` on `layer`.
    #[inline]
    pub(super) fn links(&self, id: u32, layer: u8) -> &[u32] {
        let record = self.record(id, layer);
        &record[1..1 + record[0] as usize]
    }

    /// Replaces the links of `id` on `layer` (unused slots are zeroed, so a snapshot of the
    /// same graph is the same bytes).
    fn set_links(&mut self, id: u32, layer: u8, links: &[Scored]) {
        let record = self.record_mut(id, layer);
        debug_assert!(links.len() < record.len());
        record[0] = links.len() as u32;
        for (slot, link) in record[1..].iter_mut().zip(links) {
            *slot = link.id;
        }
        record[1 + links.len()..].fill(0);
    }

    /// Greedy descent on an upper layer: move to a better neighbour until none is better.
    fn greedy(&self, q: &[i8], scale: f32, mut best: Scored, layer: u8) -> Scored {
        loop {
            let mut moved = false;
            for &n in self.links(best.id, layer) {
                let sim = self.sim(q, scale, n);
                if sim > best.sim {
                    best = Scored { sim, id: n };
                    moved = true;
                }
            }
            if !moved {
                return best;
            }
        }
    }

    /// The paper's SEARCH-LAYER: best-first from `entries`, keeping the `ef` best nodes.
    /// With a filter, every node is walked but only allowed ones are kept, so the search goes
    /// on until it holds `ef` allowed nodes better than anything left to expand. Best first.
    fn search_layer(
        &self,
        q: &[i8],
        scale: f32,
        entries: &[Scored],
        ef: usize,
        layer: u8,
        filter: Option<&dyn Fn(u32) -> bool>,
    ) -> Vec<Scored> {
        let allowed = |id: u32| filter.is_none_or(|f| f(id));
        let mut visited = Visited::new(self.len());
        let mut candidates: BinaryHeap<Scored> = BinaryHeap::new();
        let mut found = TopK::new(ef);
        let mut kept = 0usize;
        let mut worst = f32::NEG_INFINITY;
        for &e in entries {
            if visited.insert(e.id) {
                candidates.push(e);
                if allowed(e.id) {
                    found.offer(e);
                    kept += 1;
                }
            }
        }
        if kept >= ef {
            worst = found.worst().map_or(worst, |w| w.sim);
        }
        while let Some(c) = candidates.pop() {
            if kept >= ef && c.sim < worst {
                break;
            }
            for &n in self.links(c.id, layer) {
                if !visited.insert(n) {
                    continue;
                }
                let sim = self.sim(q, scale, n);
                if kept < ef || sim > worst {
                    let s = Scored { sim, id: n };
                    candidates.push(s);
                    if allowed(n) {
                        found.offer(s);
                        kept += 1;
                        if kept >= ef {
                            worst = found.worst().map_or(worst, |w| w.sim);
                        }
                    }
                }
            }
        }
        found.into_sorted()
    }

    /// The `k` best allowed nodes by descending the layers, then searching layer 0 with `ef`.
    pub(super) fn graph_search(
        &self,
        q: &[i8],
        scale: f32,
        k: usize,
        ef: usize,
        filter: Option<&dyn Fn(u32) -> bool>,
    ) -> Vec<Scored> {
        let Some(entry) = self.entry else {
            return Vec::new();
        };
        let mut best = Scored {
            sim: self.sim(q, scale, entry),
            id: entry,
        };
        for layer in (1..=self.max_level).rev() {
            best = self.greedy(q, scale, best, layer);
        }
        let mut found = self.search_layer(q, scale, &[best], ef.max(k), 0, filter);
        found.truncate(k);
        found
    }

    /// The paper's SELECT-NEIGHBORS-HEURISTIC: walking `candidates` best first, keep one only
    /// if it is more similar to the base node than to every node kept so far, so links spread
    /// in different directions instead of crowding into one cluster.
    fn select_neighbours(&self, candidates: &[Scored], cap: usize) -> Vec<Scored> {
        let mut kept: Vec<Scored> = Vec::with_capacity(cap);
        for &c in candidates {
            if kept.len() >= cap {
                break;
            }
            if kept.iter().all(|r| self.sim_nodes(c.id, r.id) < c.sim) {
                kept.push(c);
            }
        }
        kept
    }

    /// Adds `new` (similarity `sim`) to the links of `node` on `layer`; a full list is
    /// re-selected by the heuristic among its links and `new`.
    fn add_link(&mut self, node: u32, new: u32, sim: f32, layer: u8) {
        let cap = if layer == 0 { 2 * self.m } else { self.m };
        let record = self.record_mut(node, layer);
        let count = record[0] as usize;
        if count < cap {
            record[1 + count] = new;
            record[0] += 1;
            return;
        }
        let mut candidates: Vec<Scored> = self
            .links(node, layer)
            .iter()
            .map(|&id| Scored {
                sim: self.sim_nodes(node, id),
                id,
            })
            .collect();
        candidates.push(Scored { sim, id: new });
        candidates.sort_unstable_by(|a, b| b.cmp(a));
        let kept = self.select_neighbours(&candidates, cap);
        self.set_links(node, layer, &kept);
    }

    /// Links the just-pushed node `id` into every layer up to `level`.
    pub(super) fn link_new_node(&mut self, id: u32, level: u8) {
        let Some(entry) = self.entry else {
            self.entry = Some(id);
            self.max_level = level;
            return;
        };
        let q = self.vectors.get(id as usize).to_vec();
        let scale = self.scales[id as usize];
        let mut best = Scored {
            sim: self.sim(&q, scale, entry),
            id: entry,
        };
        for layer in (level + 1..=self.max_level).rev() {
            best = self.greedy(&q, scale, best, layer);
        }
        let mut entries = vec![best];
        for layer in (0..=level.min(self.max_level)).rev() {
            let found = self.search_layer(&q, scale, &entries, self.ef_construction, layer, None);
            let kept = self.select_neighbours(&found, self.m);
            self.set_links(id, layer, &kept);
            for n in &kept {
                self.add_link(n.id, id, n.sim, layer);
            }
            entries = found;
        }
        if level > self.max_level {
            self.entry = Some(id);
            self.max_level = level;
        }
    }
}
