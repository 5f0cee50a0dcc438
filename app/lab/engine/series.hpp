// app/lab/engine/series.hpp — an append-only sequence that the engine grows and the UI reads from
// immutable snapshots, without copying what was already published.
//
// Elements are stored in chunks of kChunk. A published Series shares every FULL chunk with the builder
// (full chunks never change again) and gets its own copy of the partial last chunk, so publishing
// costs O(chunks + kChunk) however long the series is, and a snapshot never sees a later append.
// Builder: engine (or one) thread only. Series: immutable, any thread.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace tttlab::lab {

template <class T>
class Series {
 public:
  static constexpr std::size_t kChunk = 512;

  std::size_t size() const { return m_size; }
  bool empty() const { return m_size == 0; }
  const T& operator[](std::size_t i) const { return (*m_chunks[i / kChunk])[i % kChunk]; }
  const T& back() const { return (*this)[m_size - 1]; }

 private:
  template <class U>
  friend class SeriesBuilder;
  std::vector<std::shared_ptr<const std::vector<T>>> m_chunks;
  std::size_t m_size = 0;
};

template <class T>
class SeriesBuilder {
 public:
  void push_back(T value) {
    if (m_tail.size() == Series<T>::kChunk) {
      m_full.push_back(std::make_shared<const std::vector<T>>(std::move(m_tail)));
      m_tail.clear();
      m_tail.reserve(Series<T>::kChunk);
    }
    m_tail.push_back(std::move(value));
  }
  std::size_t size() const { return m_full.size() * Series<T>::kChunk + m_tail.size(); }
  void clear() {
    m_full.clear();
    m_tail.clear();
  }
  // An immutable copy of the current contents (see the header comment for the cost).
  std::shared_ptr<const Series<T>> publish() const {
    auto s = std::make_shared<Series<T>>();
    s->m_chunks = m_full;
    if (!m_tail.empty()) s->m_chunks.push_back(std::make_shared<const std::vector<T>>(m_tail));
    s->m_size = size();
    return s;
  }

 private:
  std::vector<std::shared_ptr<const std::vector<T>>> m_full;
  std::vector<T> m_tail;
};

}  // namespace tttlab::lab
