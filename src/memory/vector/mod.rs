//! Exact (brute-force) vector search over unit vectors; the HNSW index takes its place.

pub struct VectorIndex {
    dims: usize,
    data: Vec<f32>,
}

impl VectorIndex {
    pub fn new(dims: usize, _seed: u64) -> Self {
        Self {
            dims,
            data: Vec::new(),
        }
    }
    pub fn dims(&self) -> usize {
        self.dims
    }
    pub fn len(&self) -> usize {
        self.data.len() / self.dims.max(1)
    }
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
    pub fn insert(&mut self, id: u32, v: &[f32]) -> Result<(), String> {
        if v.len() != self.dims || id as usize != self.len() {
            return Err("bad vector".into());
        }
        self.data.extend_from_slice(v);
        Ok(())
    }
    pub fn search(&self, q: &[f32], k: usize, filter: &dyn Fn(u32) -> bool) -> Vec<(u32, f32)> {
        let mut all: Vec<(u32, f32)> = self
            .data
            .chunks(self.dims)
            .enumerate()
            .filter(|(i, _)| filter(*i as u32))
            .map(|(i, v)| (i as u32, v.iter().zip(q).map(|(a, b)| a * b).sum()))
            .collect();
        all.sort_by(|a, b| b.1.total_cmp(&a.1));
        all.truncate(k);
        all
    }
    pub fn snapshot(&self) -> Vec<u8> {
        let mut out = (self.dims as u32).to_le_bytes().to_vec();
        for f in &self.data {
            out.extend_from_slice(&f.to_le_bytes());
        }
        out
    }
    pub fn restore(bytes: &[u8]) -> Result<Self, String> {
        if bytes.len() < 4 || !(bytes.len() - 4).is_multiple_of(4) {
            return Err("corrupt".into());
        }
        let dims = u32::from_le_bytes(bytes[..4].try_into().unwrap()) as usize;
        let data: Vec<f32> = bytes[4..]
            .chunks(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        if dims == 0 || !data.len().is_multiple_of(dims) {
            return Err("corrupt".into());
        }
        Ok(Self { dims, data })
    }
}
