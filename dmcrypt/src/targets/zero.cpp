// dm-zero: reads zeros, drops writes; no backing, so I/O completes before
// submit returns.
#include "inside.hpp"

#include <blkcrypt/dm/targets.hpp>

#include <cstring>

namespace blkcrypt::dm {
namespace {

class ZeroDevice final : public BlockDevice {
public:
    ZeroDevice(uint64_t size, bool read_only) : size_(size), read_only_(read_only) {}
    uint64_t size() const override { return size_; }
    uint32_t block_size() const override { return 512; }
    bool read_only() const override { return read_only_; }
    Status submit_read(uint64_t offset, Bytes out, Completion done) override {
        if (!done || !inside(offset, out.size(), size_, 512)) return Status::Invalid;
        std::memset(out.data(), 0, out.size());
        done(Status::Ok);
        return Status::InProgress;
    }
    Status submit_write(uint64_t offset, ConstBytes in, Completion done) override {
        if (read_only_) return Status::Unsupported;
        if (!done || !inside(offset, in.size(), size_, 512)) return Status::Invalid;
        done(Status::Ok);  // dm-zero drops writes
        return Status::InProgress;
    }
    Status flush() override { return Status::Ok; }
    void drain() override {}
    std::string describe() const override { return "zero"; }

private:
    const uint64_t size_;
    const bool read_only_;
};

}  // namespace

std::shared_ptr<BlockDevice> make_zero_device(uint64_t size, bool read_only) {
    return std::make_shared<ZeroDevice>(size, read_only);
}

}  // namespace blkcrypt::dm
