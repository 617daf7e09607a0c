#include <blkcrypt/internal/mapped_file.hpp>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <mutex>

#include <sys/mman.h>
#include <unistd.h>

namespace blkcrypt {
namespace {

// The handler reads these without locks: a slot is published by storing
// `end` last and retired by clearing `end` first (before the munmap).
struct Slot {
    std::atomic<uintptr_t> begin{0};
    std::atomic<uintptr_t> end{0};  // 0: free
    std::atomic<bool> truncated{false};
};
constexpr int kSlots = 256;  // mappings alive at once; beyond that, callers pread
Slot g_slots[kSlots];
std::mutex g_slots_mu;  // serialises slot allocation (never taken by the handler)
struct sigaction g_previous {};
uintptr_t g_page = 4096;

void on_sigbus(int sig, siginfo_t* info, void* ctx) {
    const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
    for (Slot& s : g_slots) {
        const uintptr_t end = s.end.load(std::memory_order_acquire);
        const uintptr_t begin = s.begin.load(std::memory_order_acquire);
        // Re-read: a slot being reused meanwhile is not taken for a match.
        if (end && addr >= begin && addr < end && s.end.load(std::memory_order_acquire) == end) {
            void* page = reinterpret_cast<void*>(addr & ~(g_page - 1));
            // A private zero page in place of the vanished file page; the
            // faulting load is restarted and reads zeros.
            if (::mmap(page, g_page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != MAP_FAILED) {
                s.truncated.store(true, std::memory_order_release);
                return;
            }
            break;
        }
    }
    // Not ours: what would have happened without us.
    if (g_previous.sa_flags & SA_SIGINFO) {
        if (g_previous.sa_sigaction) return g_previous.sa_sigaction(sig, info, ctx);
    } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
        return g_previous.sa_handler(sig);
    }
    // Default action: restore it and return; the load faults again and the
    // kernel delivers SIGBUS with its default effect.
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    ::sigaction(SIGBUS, &dfl, nullptr);
}

void install_handler() {
    g_page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    struct sigaction sa {};
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGBUS, &sa, &g_previous);
}

}  // namespace

std::unique_ptr<MappedFile> MappedFile::map(int fd, uint64_t size) noexcept {
    if (size == 0 || size > SIZE_MAX) return nullptr;
    static std::once_flag once;
    std::call_once(once, install_handler);
    void* p = ::mmap(nullptr, static_cast<std::size_t>(size), PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return nullptr;
    (void)::madvise(p, static_cast<std::size_t>(size), MADV_SEQUENTIAL);
    std::lock_guard lk(g_slots_mu);
    for (int i = 0; i < kSlots; ++i) {
        Slot& s = g_slots[i];
        if (s.end.load(std::memory_order_relaxed)) continue;
        s.truncated.store(false, std::memory_order_relaxed);
        s.begin.store(reinterpret_cast<uintptr_t>(p), std::memory_order_release);
        s.end.store(reinterpret_cast<uintptr_t>(p) + static_cast<std::size_t>(size), std::memory_order_release);
        std::unique_ptr<MappedFile> m(new (std::nothrow) MappedFile(static_cast<const uint8_t*>(p),
                                                                    static_cast<std::size_t>(size), i));
        if (m) return m;
        s.end.store(0, std::memory_order_release);
        break;
    }
    ::munmap(p, static_cast<std::size_t>(size));  // unguarded mappings are never handed out
    return nullptr;
}

MappedFile::~MappedFile() {
    {
        std::lock_guard lk(g_slots_mu);
        g_slots[slot_].end.store(0, std::memory_order_release);
    }
    ::munmap(const_cast<uint8_t*>(base_), size_);
}

bool MappedFile::truncated() const noexcept {
    return g_slots[slot_].truncated.load(std::memory_order_acquire);
}

void MappedFile::release(uint64_t offset, uint64_t len) const noexcept {
    const uint64_t begin = (offset + g_page - 1) / g_page * g_page;  // whole pages inside the range
    const uint64_t end = std::min<uint64_t>(offset + len, size_) / g_page * g_page;
    if (end > begin) (void)::madvise(const_cast<uint8_t*>(base_) + begin, end - begin, MADV_DONTNEED);
}

}  // namespace blkcrypt
