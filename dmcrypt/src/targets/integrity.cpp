// dm-integrity as a block device. With an internal hash, reads check every
// tag (a mismatch fails the read with Corrupt, as the kernel's EILSEQ) and
// writes compute them. Without one the tags belong to the target above
// (dm-crypt's integrity feature): plain reads and writes are refused, and
// that target reaches data and tags through tagged().
#include <blkcrypt/dm/targets.hpp>
#include <blkcrypt/integrity/device.hpp>

#include <mutex>

namespace blkcrypt::dm {
namespace {

// The checked view as a store, for a store device's I/O pool.
class CheckedStore final : public BackingStore {
public:
    CheckedStore(std::shared_ptr<integrity::IntegrityTarget> t, IntegrityFailure on_failure)
        : t_(std::move(t)), on_failure_(std::move(on_failure)) {}
    Status read(uint64_t offset, Bytes out) override {
        if (!t_->tag_hash()) return Status::Unsupported;
        return report(t_->read_checked(offset, out));
    }
    Status write(uint64_t offset, ConstBytes in) override {
        if (!t_->tag_hash()) return Status::Unsupported;
        return report(t_->write_hashed(offset, in));
    }
    Status flush() override { return report(t_->flush()); }
    uint64_t size() const override { return t_->size(); }
    std::string name() const override { return t_->describe(); }

private:
    // The status alone loses the message (and with it the failing sector).
    Status report(const Result<void>& r) {
        if (r) return Status::Ok;
        if (on_failure_) {
            std::lock_guard lk(mu_);
            on_failure_(r.error());
        }
        return r.status();
    }
    std::shared_ptr<integrity::IntegrityTarget> t_;
    IntegrityFailure on_failure_;
    std::mutex mu_;
};

// The store device, plus the tagged view for a crypt line stacked on it.
class IntegrityDevice final : public BlockDevice {
public:
    IntegrityDevice(std::shared_ptr<BlockDevice> inner, std::shared_ptr<integrity::IntegrityTarget> t)
        : inner_(std::move(inner)), t_(std::move(t)) {}
    uint64_t size() const override { return inner_->size(); }
    uint32_t block_size() const override { return inner_->block_size(); }
    bool read_only() const override { return inner_->read_only(); }
    Status submit_read(uint64_t offset, Bytes out, Completion done) override {
        return inner_->submit_read(offset, out, std::move(done));
    }
    Status submit_write(uint64_t offset, ConstBytes in, Completion done) override {
        return inner_->submit_write(offset, in, std::move(done));
    }
    Status flush() override { return inner_->flush(); }
    void drain() override { inner_->drain(); }
    // allow_discards: the kernel's discard (tags of the filler, data
    // punched out), advertised to NBD clients as TRIM.
    bool can_discard() const override { return !read_only() && t_->allow_discards(); }
    Status discard(uint64_t offset, uint64_t len) override {
        if (!can_discard()) return Status::Unsupported;
        auto r = t_->discard(offset, len);
        return r ? Status::Ok : r.status();
    }
    std::string describe() const override { return inner_->describe(); }
    std::shared_ptr<integrity::TaggedDevice> tagged() override { return t_; }

private:
    std::shared_ptr<BlockDevice> inner_;
    std::shared_ptr<integrity::IntegrityTarget> t_;
};

}  // namespace

Result<std::shared_ptr<BlockDevice>> make_integrity_device(std::shared_ptr<integrity::IntegrityTarget> target,
                                                           unsigned threads, IntegrityFailure on_failure) {
    if (!target) return make_error(Status::Invalid, "no integrity target");
    StoreDeviceOptions o;
    o.read_only = target->read_only();
    o.block_size = target->block_size();
    o.threads = threads;
    o.description = target->describe();
    if (!target->tag_hash()) o.description += " (no internal hash: tags from the target above; plain I/O refused)";
    auto d = make_store_device(std::make_shared<CheckedStore>(target, std::move(on_failure)), o);
    if (!d) return d.error();
    return std::shared_ptr<BlockDevice>(std::make_shared<IntegrityDevice>(*d, std::move(target)));
}

}  // namespace blkcrypt::dm
