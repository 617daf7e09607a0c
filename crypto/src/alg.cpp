#include "alg_record.hpp"

namespace blkcrypt {

Alg::Alg(AlgInfo info) : info_(std::move(info)), rec_(std::make_unique<detail::AlgRecord>()) {}
Alg::~Alg() = default;

void Alg::set_test_name(std::string name) { rec_->test_name = std::move(name); }

namespace detail {

AlgRecord& record_of(const Alg& alg) noexcept { return *alg.rec_; }

const std::vector<std::shared_ptr<const Alg>>& spawns_of(const Alg& alg) noexcept {
    return record_of(alg).spawns;
}

void record_spawn(Alg& owner, std::shared_ptr<const Alg> spawn) {
    record_of(owner).spawns.push_back(std::move(spawn));
}

}  // namespace detail
}  // namespace blkcrypt
