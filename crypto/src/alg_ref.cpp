#include "alg_record.hpp"

#include <blkcrypt/alg_ref.hpp>
#include <blkcrypt/internal/alg.hpp>

namespace blkcrypt {

AlgRef::AlgRef(std::shared_ptr<const Alg> alg) : alg_(std::move(alg)) {
    if (alg_) detail::record_of(*alg_).users.fetch_add(1, std::memory_order_relaxed);
}

AlgRef::AlgRef(const AlgRef& o) : AlgRef(o.alg_) {}

AlgRef& AlgRef::operator=(const AlgRef& o) {
    if (this != &o) {
        release();
        alg_ = o.alg_;
        if (alg_) detail::record_of(*alg_).users.fetch_add(1, std::memory_order_relaxed);
    }
    return *this;
}

AlgRef& AlgRef::operator=(AlgRef&& o) noexcept {
    if (this != &o) {
        release();
        alg_ = std::move(o.alg_);
    }
    return *this;
}

AlgRef::~AlgRef() { release(); }

void AlgRef::release() noexcept {
    if (alg_) detail::record_of(*alg_).users.fetch_sub(1, std::memory_order_relaxed);
    alg_.reset();
}

const AlgInfo& AlgRef::info() const noexcept { return alg_->info(); }

}  // namespace blkcrypt
