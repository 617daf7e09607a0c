// dm-linear: a window [offset, offset + length) of a lower device.
#include "inside.hpp"

#include <blkcrypt/dm/targets.hpp>

namespace blkcrypt::dm {
namespace {

class LinearDevice final : public BlockDevice {
public:
    LinearDevice(std::shared_ptr<BlockDevice> lower, uint64_t offset, uint64_t length)
        : lower_(std::move(lower)), offset_(offset), length_(length) {}
    uint64_t size() const override { return length_; }
    uint32_t block_size() const override { return lower_->block_size(); }
    bool read_only() const override { return lower_->read_only(); }
    Status submit_read(uint64_t offset, Bytes out, Completion done) override {
        if (!inside(offset, out.size(), length_, block_size())) return Status::Invalid;
        return lower_->submit_read(offset_ + offset, out, std::move(done));
    }
    Status submit_write(uint64_t offset, ConstBytes in, Completion done) override {
        if (!inside(offset, in.size(), length_, block_size())) return Status::Invalid;
        return lower_->submit_write(offset_ + offset, in, std::move(done));
    }
    Status flush() override { return lower_->flush(); }
    bool can_discard() const override { return lower_->can_discard(); }
    Status discard(uint64_t offset, uint64_t len) override {
        const uint32_t bs = block_size();
        if (!len || offset % bs || len % bs || offset > length_ || len > length_ - offset) return Status::Invalid;
        return lower_->discard(offset_ + offset, len);
    }
    void drain() override { lower_->drain(); }
    std::string describe() const override {
        return "linear " + std::to_string(offset_ / 512) + " of " + lower_->describe();
    }

private:
    std::shared_ptr<BlockDevice> lower_;
    const uint64_t offset_, length_;
};

}  // namespace

Result<std::shared_ptr<BlockDevice>> make_linear_device(std::shared_ptr<BlockDevice> lower, uint64_t offset,
                                                        uint64_t length) {
    if (!lower) return make_error(Status::Invalid, "no device");
    const uint32_t bs = lower->block_size();
    if (offset % bs || length % bs || length == 0)
        return make_error(Status::Invalid, "not aligned to the " + std::to_string(bs) + "-byte blocks of " +
                                               lower->describe());
    if (offset > lower->size() || length > lower->size() - offset)
        return make_error(Status::Invalid, lower->describe() + " is too small: " + std::to_string(lower->size() / 512) +
                                               " sectors, the line needs " + std::to_string((offset + length) / 512));
    return std::shared_ptr<BlockDevice>(std::make_shared<LinearDevice>(std::move(lower), offset, length));
}

}  // namespace blkcrypt::dm
