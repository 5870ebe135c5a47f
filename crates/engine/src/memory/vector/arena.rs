//! Fixed-stride records (a vector's int8 components, a node's layer-0 links) in chunks of
//! [`CHUNK`] records, so growing never copies what is stored nor holds two copies at once (a
//! wasm linear memory never shrinks back after such a peak).

/// Records per chunk.
pub(super) const CHUNK: usize = 1024;

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Arena<T> {
    stride: usize,
    len: usize,
    chunks: Vec<Vec<T>>,
}

impl<T: Copy + Default> Arena<T> {
    pub(super) fn new(stride: usize) -> Self {
        Self {
            stride,
            len: 0,
            chunks: Vec::new(),
        }
    }

    /// Appends one record of `stride` values.
    pub(super) fn push(&mut self, record: &[T]) {
        debug_assert_eq!(record.len(), self.stride);
        if self.len.is_multiple_of(CHUNK) {
            self.chunks.push(Vec::with_capacity(CHUNK * self.stride));
        }
        let chunk = self.chunks.last_mut().expect("a chunk was just ensured");
        chunk.extend_from_slice(record);
        self.len += 1;
    }

    /// Appends one record of default values and returns it.
    pub(super) fn push_default(&mut self) -> &mut [T] {
        if self.len.is_multiple_of(CHUNK) {
            self.chunks.push(Vec::with_capacity(CHUNK * self.stride));
        }
        let chunk = self.chunks.last_mut().expect("a chunk was just ensured");
        let start = chunk.len();
        chunk.resize(start + self.stride, T::default());
        self.len += 1;
        &mut chunk[start..]
    }

    #[inline]
    pub(super) fn get(&self, index: usize) -> &[T] {
        let offset = (index % CHUNK) * self.stride;
        &self.chunks[index / CHUNK][offset..offset + self.stride]
    }

    #[inline]
    pub(super) fn get_mut(&mut self, index: usize) -> &mut [T] {
        let offset = (index % CHUNK) * self.stride;
        &mut self.chunks[index / CHUNK][offset..offset + self.stride]
    }

    /// Every record in order, chunk by chunk (the fast path of an exact scan).
    pub(super) fn chunks(&self) -> impl Iterator<Item = &[T]> {
        self.chunks.iter().map(Vec::as_slice)
    }

    /// Bytes allocated on the heap.
    pub(super) fn heap_bytes(&self) -> usize {
        self.chunks.capacity() * std::mem::size_of::<Vec<T>>()
            + self
                .chunks
                .iter()
                .map(|c| c.capacity() * std::mem::size_of::<T>())
                .sum::<usize>()
    }
}
