// AlgRef: a counted reference to a registered algorithm, held by every
// transform handle. It keeps the algorithm (and a plugin that provides it)
// alive and makes the handle visible in the algorithm's refcnt.
#pragma once

#include <blkcrypt/alg_info.hpp>

#include <memory>

namespace blkcrypt {

class Alg;

class AlgRef {
public:
    AlgRef() = default;
    explicit AlgRef(std::shared_ptr<const Alg> alg);
    AlgRef(const AlgRef& o);
    AlgRef& operator=(const AlgRef& o);
    AlgRef(AlgRef&& o) noexcept = default;
    AlgRef& operator=(AlgRef&& o) noexcept;
    ~AlgRef();

    const Alg& alg() const noexcept { return *alg_; }
    const std::shared_ptr<const Alg>& ptr() const noexcept { return alg_; }
    const AlgInfo& info() const noexcept;
    explicit operator bool() const noexcept { return alg_ != nullptr; }

private:
    void release() noexcept;
    std::shared_ptr<const Alg> alg_;
};

}  // namespace blkcrypt
