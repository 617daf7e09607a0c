// dm-verity: the verified data of a VerityTarget, read-only, on a store
// device's I/O pool.
#include <blkcrypt/dm/targets.hpp>
#include <blkcrypt/verity/target.hpp>

namespace blkcrypt::dm {
namespace {

// The verified view as a read-only store, for a store device's I/O pool.
class VerifiedStore final : public BackingStore {
public:
    VerifiedStore(std::unique_ptr<verity::VerityTarget> t, std::string name) : t_(std::move(t)), name_(std::move(name)) {}
    Status read(uint64_t offset, Bytes out) override { return t_->read(offset, out); }
    Status write(uint64_t, ConstBytes) override { return Status::Unsupported; }
    uint64_t size() const override { return t_->size(); }
    std::string name() const override { return name_; }

private:
    std::unique_ptr<verity::VerityTarget> t_;
    std::string name_;
};

}  // namespace

Result<std::shared_ptr<BlockDevice>> make_verity_device(std::unique_ptr<verity::VerityTarget> target,
                                                        unsigned threads, std::string description) {
    if (!target) return make_error(Status::Invalid, "no verity target");
    StoreDeviceOptions o;
    o.read_only = true;
    o.block_size = target->block_size();
    o.threads = threads;
    o.description = description;
    return make_store_device(std::make_shared<VerifiedStore>(std::move(target), description), o);
}

}  // namespace blkcrypt::dm
