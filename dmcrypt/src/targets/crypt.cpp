// dm-crypt: a CryptTarget as a block device, one bio per I/O on its async
// path.
#include <blkcrypt/dm/bio.hpp>
#include <blkcrypt/dm/crypt_target.hpp>
#include <blkcrypt/dm/targets.hpp>

namespace blkcrypt::dm {
namespace {

class CryptDevice final : public BlockDevice {
public:
    CryptDevice(std::shared_ptr<dm::CryptTarget> t, std::shared_ptr<BackingStore> s, bool ro)
        : target_(std::move(t)), store_(std::move(s)), read_only_(ro) {}
    ~CryptDevice() override { target_->drain(); }
    uint64_t size() const override { return target_->length_sectors() * 512; }
    uint32_t block_size() const override { return static_cast<uint32_t>(target_->table().sector_size); }
    bool read_only() const override { return read_only_; }

    Status submit_read(uint64_t offset, Bytes out, Completion done) override {
        return submit(dm::BioDir::Read, offset, out.data(), out.size(), std::move(done));
    }
    Status submit_write(uint64_t offset, ConstBytes in, Completion done) override {
        if (read_only_) return Status::Unsupported;
        // The target encrypts into its own bounce buffers: `in` is only read.
        return submit(dm::BioDir::Write, offset, const_cast<uint8_t*>(in.data()), in.size(), std::move(done));
    }
    Status flush() override { return read_only_ ? Status::Ok : store_->flush(); }
    bool can_discard() const override { return !read_only_ && target_->table().allow_discards; }
    Status discard(uint64_t offset, uint64_t len) override {
        const uint32_t bs = block_size();
        if (!can_discard()) return Status::Unsupported;
        if (offset % bs || len % bs || offset > size() || len > size() - offset) return Status::Invalid;
        return store_->discard(target_->table().offset * 512 + offset, len);
    }
    void drain() override { target_->drain(); }
    std::string describe() const override {
        return "crypt " + target_->table().cipher + " over " + store_->name();
    }

private:
    static constexpr std::size_t kInlineMax = 16 << 10;
    // One heap record per bio: the bio must live until its completion.
    struct Op {
        dm::Bio bio;
        Completion done;
    };
    Status submit(dm::BioDir dir, uint64_t offset, uint8_t* data, std::size_t len, Completion done) {
        const uint32_t bs = block_size();
        if (!done || !len || offset % bs || len % bs || offset > size() || len > size() - offset)
            return Status::Invalid;
        auto* op = new Op;
        op->done = std::move(done);
        op->bio.dir = dir;
        op->bio.sector = offset / 512;
        op->bio.vecs = {{data, len}};
        op->bio.on_complete = [op](Status s) {
            Completion d = std::move(op->done);
            delete op;
            d(s);
        };
        // Small I/O runs in the caller's thread: for 4 KiB the hand-over to a
        // worker and back (two wake-ups) costs more than the I/O and the
        // cipher; large I/O goes to the workers, several cores at once.
        if (len <= kInlineMax) {
            const Status s = target_->run_inline(op->bio);
            if (s == Status::InProgress) return s;
            Completion d = std::move(op->done);
            delete op;
            if (s == Status::Invalid) return s;
            d(s);
            return Status::InProgress;
        }
        const Status s = target_->submit(op->bio);
        if (s != Status::InProgress && s != Status::Ok) {
            delete op;
            return s;
        }
        return Status::InProgress;
    }

    std::shared_ptr<dm::CryptTarget> target_;
    std::shared_ptr<BackingStore> store_;
    const bool read_only_;
};

}  // namespace

std::shared_ptr<BlockDevice> make_crypt_device(std::shared_ptr<dm::CryptTarget> target,
                                               std::shared_ptr<BackingStore> store, bool read_only) {
    return std::make_shared<CryptDevice>(std::move(target), std::move(store), read_only);
}

}  // namespace blkcrypt::dm
