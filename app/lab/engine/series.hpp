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

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const T& operator[](std::size_t i) const { return (*chunks_[i / kChunk])[i % kChunk]; }
  const T& back() const { return (*this)[size_ - 1]; }

 private:
  template <class U>
  friend class SeriesBuilder;
  std::vector<std::shared_ptr<const std::vector<T>>> chunks_;
  std::size_t size_ = 0;
};

template <class T>
class SeriesBuilder {
 public:
  void push_back(T value) {
    if (tail_.size() == Series<T>::kChunk) {
      full_.push_back(std::make_shared<const std::vector<T>>(std::move(tail_)));
      tail_.clear();
      tail_.reserve(Series<T>::kChunk);
    }
    tail_.push_back(std::move(value));
  }
  std::size_t size() const { return full_.size() * Series<T>::kChunk + tail_.size(); }
  void clear() {
    full_.clear();
    tail_.clear();
  }
  // An immutable copy of the current contents (see the header comment for the cost).
  std::shared_ptr<const Series<T>> publish() const {
    auto s = std::make_shared<Series<T>>();
    s->chunks_ = full_;
    if (!tail_.empty()) s->chunks_.push_back(std::make_shared<const std::vector<T>>(tail_));
    s->size_ = size();
    return s;
  }

 private:
  std::vector<std::shared_ptr<const std::vector<T>>> full_;
  std::vector<T> tail_;
};

}  // namespace tttlab::lab
