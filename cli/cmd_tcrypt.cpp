// blkcrypt tcrypt: TrueCrypt and VeraCrypt volumes as cryptsetup's TCRYPT
// reads them (tcryptDump, tcryptOpen), without root or device-mapper: the
// plaintext goes through the dm-crypt engine. The actions are
// container_driver's; this is how a volume's header is found and opened.
#include "commands.hpp"
#include "container_common.hpp"
#include "container_driver.hpp"
#include "number_option.hpp"
#include "passphrase.hpp"

#include <blkcrypt/backing_store.hpp>
#include <blkcrypt/tcrypt/tcrypt.hpp>

#include <algorithm>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <unistd.h>

namespace cli {
namespace {

namespace tcrypt = blkcrypt::tcrypt;

// A keyfile: its first 1 MiB (the rest does not count, as in TrueCrypt).
blkcrypt::SecureBuffer read_keyfile(const std::string& path) {
    auto s = blkcrypt::open_store(path, false);
    if (!s) throw Failure("Failed to open key file " + path + ": " + s.error().message);
    blkcrypt::SecureBuffer b(std::min<uint64_t>((*s)->size(), tcrypt::kKeyfileMax));
    if ((*s)->read(0, b.span()) != blkcrypt::Status::Ok) throw Failure("Error reading keyfile " + path + ".");
    return b;
}

tcrypt::OpenOptions open_options(const po::variables_map& vm) {
    tcrypt::OpenOptions o;
    o.hidden = vm["tcrypt-hidden"].as<bool>();
    o.backup = vm["tcrypt-backup"].as<bool>();
    o.system = vm["tcrypt-system"].as<bool>();
    o.veracrypt = !vm["disable-veracrypt"].as<bool>();
    if (o.hidden && o.system) throw UsageError("--tcrypt-hidden and --tcrypt-system exclude each other");
    if (vm["veracrypt-query-pim"].as<bool>() && (vm.count("veracrypt-pim") || !o.veracrypt))
        throw UsageError("--veracrypt-query-pim needs VeraCrypt mode and excludes --veracrypt-pim");
    if (vm.count("veracrypt-pim")) {
        if (!o.veracrypt) throw UsageError("--veracrypt-pim needs VeraCrypt mode (not with --disable-veracrypt)");
        o.pim = vm["veracrypt-pim"].as<uint32_t>();
    }
    if (vm.count("hash")) o.hash = vm["hash"].as<std::string>();
    if (vm.count("cipher")) o.cipher = vm["cipher"].as<std::string>();
    if (vm.count("key-file"))
        for (const auto& f : vm["key-file"].as<std::vector<std::string>>())
            o.keyfiles.push_back(read_keyfile(f));
    // With a PIM each KDF try takes seconds, and Argon2id minutes (PIM 1234:
    // 1216 passes over 1 GiB): say which one runs, at a terminal or with --progress.
    const bool progress = vm.count("progress") && vm["progress"].as<bool>();
    if ((vm.count("veracrypt-pim") || vm["veracrypt-query-pim"].as<bool>()) && (progress || ::isatty(STDERR_FILENO)))
        o.on_kdf = [](std::string_view hash, uint32_t iterations, uint32_t memory_kib) {
            std::string line = "Trying KDF " + std::string(hash) + ": " + std::to_string(iterations);
            line += memory_kib ? " passes over " + std::to_string(memory_kib / 1024) + " MiB" : " iterations";
            std::cerr << line << (memory_kib ? " (this takes minutes; -h HASH limits the search)" : "") << "...\n"
                      << std::flush;
        };
    // Always said: without it a wrong PIM or passphrase would not show that
    // one KDF was left out (docs/tcrypt.md).
    o.on_kdf_skipped = [](std::string_view hash, uint32_t iterations, uint32_t memory_kib) {
        std::cerr << "Not trying KDF " << hash << " at this PIM (" << iterations << " passes over "
                  << memory_kib / 1024 << " MiB a try; above PIM " << tcrypt::kArgon2SearchMaxPim
                  << " only -h " << hash << " tries it).\n"
                  << std::flush;
    };
    return o;
}

// --veracrypt-query-pim: cryptsetup asks after the passphrase ("Enter
// VeraCrypt PIM: " on a terminal, else the next line of stdin).
uint32_t query_pim() {
    const blkcrypt::SecureBuffer b = ::isatty(STDIN_FILENO) ? prompt_passphrase("Enter VeraCrypt PIM: ", false)
                                                            : read_key_input("-", 0, 0, true);
    uint64_t v = 0;
    bool ok = b.size() > 0 && b.size() <= 10;
    for (std::size_t i = 0; ok && i < b.size(); ++i) {
        ok = b[i] >= '0' && b[i] <= '9';
        v = v * 10 + (b[i] - '0');
    }
    if (!ok || v > UINT32_MAX) throw Failure("Invalid PIM value: outside of range.");
    if (v == 0) throw Failure("Invalid PIM value: 0.");
    return static_cast<uint32_t>(v);
}

// Opens the volume from `hdr` (IMAGE, or the --header file): exit 2 with
// cryptsetup's words when no header decrypts. The passphrase is read as
// every format reads it (passphrase.hpp); with keyfiles it may be empty.
tcrypt::Volume unlock(const po::variables_map& vm, const std::string& image, blkcrypt::BackingStore& hdr) {
    tcrypt::OpenOptions o = open_options(vm);
    return unlock_with_tries<tcrypt::Volume>(vm, image, [&](const blkcrypt::SecureBuffer& pass) {
        if (vm["veracrypt-query-pim"].as<bool>()) o.pim = query_pim();
        return tcrypt::open(registry(), hdr, pass, o);
    });
}

// Where the header is and what the data device holds: IMAGE alone, or with
// --header the header's file (cryptsetup's --header) and IMAGE the data.
struct Devices {
    std::shared_ptr<blkcrypt::BackingStore> image, header;  // header == image without --header
    std::string header_path;
    bool detached = false;  // --header names another file than IMAGE
    std::optional<tcrypt::Partition> partition;  // --partition N (with --tcrypt-system)
};

// --tcrypt-system on images rather than block devices: cryptsetup finds the
// whole disk and the partition's start through sysfs; here a whole-disk
// IMAGE (its table names partition N), or a partition IMAGE with the disk
// (or its first sectors) as --header.
Devices open_devices(const po::variables_map& vm, const std::string& image, bool writable) {
    Devices d;
    d.image = open_container_image(image, writable);
    d.header = d.image;
    d.header_path = image;
    const bool system = vm["tcrypt-system"].as<bool>();
    // --header IMAGE itself is IMAGE alone (cryptsetup: the same device).
    if (vm.count("header") && !same_file(vm["header"].as<std::string>(), image)) {
        d.detached = true;
        d.header_path = vm["header"].as<std::string>();
        d.header = open_container_image(d.header_path, false, "--header");
    }
    if (vm.count("partition")) {
        if (!system) throw UsageError("--partition needs --tcrypt-system (the partition of a system-encrypted disk)");
        const unsigned n = vm["partition"].as<unsigned>();
        auto p = tcrypt::find_partition(*d.header, n);
        if (!p) throw Failure(d.header_path + ": " + p.error().message + ".");
        if (!d.detached && (p->start >= d.image->size() / 512 || p->sectors > d.image->size() / 512 - p->start))
            throw Failure("partition " + std::to_string(n) + " of " + image + " reaches past the end of the image.");
        d.partition = *p;
    } else if (system && !d.detached && !tcrypt::has_partition_table(*d.image)) {
        // A system partition's first sector is encrypted; a disk starts with its MBR.
        throw Failure(image + " has no partition table, so it is not a whole disk: system encryption keeps its "
                      "header at sector 62 of the disk. For an image of the encrypted partition give the disk "
                      "image (or its first 63 sectors) with --header DISK.");
    }
    return d;
}

// The volume as cryptsetup maps it: with --tcrypt-system and a partition
// (--partition N, or a partition IMAGE with --header) the partition from its
// first sector, IVs from its start on the disk (N's start in the table, else
// the encrypted area's start, the partition's when only it is encrypted).
tcrypt::Volume unlock_devices(const po::variables_map& vm, const std::string& image, const Devices& d) {
    tcrypt::Volume vol = unlock(vm, image, *d.header);
    if (!vm["tcrypt-system"].as<bool>() || (!d.partition && !d.detached)) return vol;
    const bool in_disk = !d.detached;
    tcrypt::Partition p = d.partition.value_or(tcrypt::Partition{vol.hdr.mk_offset / 512, 0});
    if (!in_disk) p.sectors = 0;  // the partition image, to its end
    if (tcrypt::map_system_partition(vol, p, in_disk) != blkcrypt::Status::Ok)
        throw Failure("cannot map the system partition of " + image + ".");
    return vol;
}

// The volume once its header opened: dump and table need the secret.
class Container final : public OpenedContainer {
public:
    Container(const std::string& image, Devices d) : OpenedContainer(image, d.image), dev_(std::move(d)) {}
    void unlock(const po::variables_map& vm) override { vol_ = unlock_devices(vm, path, dev_); }
    // Refuses what cannot be decrypted or does not fit.
    blkcrypt::Result<blkcrypt::dm::DmTable> table() const override { return tcrypt::dm_table(vol_, *store, path); }
    std::string dump() const override { return tcrypt::dump(vol_, path); }
    blkcrypt::SecureBuffer dump_volume_key() const override { return tcrypt::dump_volume_key(vol_, path); }
    // Writes land only in the data area; like cryptsetup, an outer volume's
    // writes do not protect a hidden volume inside it.
    TableDevice serve_how(const blkcrypt::dm::DmTable&) const override {
        return {.description = "crypt " + vol_.table.cipher + " over " + store->name()};
    }

private:
    Devices dev_;
    tcrypt::Volume vol_;
};

void add_options(CommandLine& cl) {
    cl.options.add_options()
        ("key-file,d", po::value<std::vector<std::string>>()->value_name("FILE"),
         "a TrueCrypt/VeraCrypt keyfile (repeatable; its first 1 MiB counts)")
        ("tcrypt-hidden", po::bool_switch(), "the hidden volume's header")
        ("tcrypt-backup", po::bool_switch(), "the backup header (at the end of the volume)")
        ("tcrypt-system", po::bool_switch(), "system encryption (the header at sector 62 of a whole-disk image)")
        ("header", po::value<std::string>()->value_name("FILE"),
         "read the header from FILE, the data from IMAGE (with --tcrypt-system: FILE is the disk or its first "
         "63 sectors, IMAGE the encrypted partition)")
        ("partition", number_value<unsigned>(1, 256)->value_name("N"),
         "with --tcrypt-system: map partition N as cryptsetup maps /dev/sdaN (N's start from the table of the "
         "whole-disk IMAGE, or of the --header FILE when IMAGE is the partition)")
        ("disable-veracrypt", po::bool_switch(), "TrueCrypt only: no VeraCrypt KDFs or header magic")
        ("veracrypt-pim", number_value<uint32_t>(1, UINT32_MAX / 2048)->value_name("PIM"),
         "VeraCrypt Personal Iterations Multiplier")
        ("veracrypt-query-pim", po::bool_switch(), "ask for the PIM after the passphrase (stdin: its next line)")
        ("hash,h", po::value<std::string>()->value_name("HASH"), "try only KDFs whose hash contains HASH")
        ("cipher,c", po::value<std::string>()->value_name("CIPHER"), "try only cipher chains whose name contains CIPHER");
}

void add_inputs(const po::variables_map& vm, std::vector<NamedPath>& inputs) {
    if (vm.count("header")) inputs.push_back({"the header file", vm["header"].as<std::string>()});
    if (vm.count("key-file"))
        for (const auto& f : vm["key-file"].as<std::vector<std::string>>()) inputs.push_back({"a key file", f});
}

}  // namespace

const ContainerFormat kTcryptFormat{
    .name = "tcrypt",
    .summary = "TrueCrypt and VeraCrypt volumes as cryptsetup (TCRYPT) opens them, without root or\n"
               "device-mapper. cryptsetup's names work at the top level too: blkcrypt tcryptDump.\n"
               "The passphrase is prompted for on a terminal (--tries times), else one line of\n"
               "stdin, or the first line of --passphrase-file; --key-file names TrueCrypt\n"
               "keyfiles (repeatable, in order). Every KDF and cipher chain is\n"
               "tried (-h, -c limit the search); VeraCrypt mode is on unless --disable-veracrypt.\n"
               "A secret that opens no header exits 2 (\"No device header detected with this\n"
               "passphrase.\"). serve exports the plaintext over NBD (docs/nbd.md), read-write\n"
               "unless --read-only.",
    .actions = {"dump", "test-passphrase", "decrypt", "serve", "table"},
    .open_name = "tcryptOpen",
    .dump_name = "tcryptDump",
    .dump_volume_key_help = "dump: also print the volume key",
    .dump_needs_secret = true,
    .add_options = add_options,
    .open = [](const po::variables_map& vm, const std::string& image,
               bool writable) -> std::unique_ptr<OpenedContainer> {
        return std::make_unique<Container>(image, open_devices(vm, image, writable));
    },
    .add_inputs = add_inputs,
};

int run_tcrypt(Args args) { return run_container(kTcryptFormat, args); }

}  // namespace cli
