// dm-error: every read and write fails; no backing, so I/O completes
// before submit returns.
#include "inside.hpp"

#include <blkcrypt/dm/targets.hpp>

namespace blkcrypt::dm {
namespace {

class ErrorDevice final : public BlockDevice {
public:
    explicit ErrorDevice(uint64_t size) : size_(size) {}
    uint64_t size() const override { return size_; }
    uint32_t block_size() const override { return 512; }
    bool read_only() const override { return false; }
    Status submit_read(uint64_t offset, Bytes out, Completion done) override {
        if (!done || !inside(offset, out.size(), size_, 512)) return Status::Invalid;
        done(Status::IoError);
        return Status::InProgress;
    }
    Status submit_write(uint64_t offset, ConstBytes in, Completion done) override {
        if (!done || !inside(offset, in.size(), size_, 512)) return Status::Invalid;
        done(Status::IoError);
        return Status::InProgress;
    }
    Status flush() override { return Status::Ok; }
    void drain() override {}
    std::string describe() const override { return "error"; }

private:
    const uint64_t size_;
};

}  // namespace

std::shared_ptr<BlockDevice> make_error_device(uint64_t size) {
    return std::make_shared<ErrorDevice>(size);
}

}  // namespace blkcrypt::dm
