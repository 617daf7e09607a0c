// The opened containers behind containers::open: one small class per format,
// each reading its metadata once and ending, as cryptsetup's formats all do,
// in the dm table of its mapping.
#include <blkcrypt/bitlk/bitlk.hpp>
#include <blkcrypt/containers/container.hpp>
#include <blkcrypt/fvault2/fvault2.hpp>
#include <blkcrypt/luks/container.hpp>

namespace blkcrypt::containers {
namespace {

class LuksContainer final : public Container {
public:
    LuksContainer(Registry& reg, std::shared_ptr<BackingStore> image, std::shared_ptr<BackingStore> header,
                  std::string path, std::string header_path, luks::Version v)
        : reg_(reg), image_(std::move(image)), header_(std::move(header)), path_(std::move(path)),
          header_path_(std::move(header_path)), version_(v) {}
    Format format() const override { return version_ == luks::Version::Luks1 ? Format::Luks1 : Format::Luks2; }
    Result<std::string> dump(bool json) const override {
        // luks::Container keeps the LUKS1/LUKS2 split.
        auto c = luks::Container::load(reg_, header_);
        if (!c) return c.error();
        if (json) return c->dump_json_metadata();
        return c->dump(header_path_);
    }
    Result<dm::DmTable> unlock(ConstBytes secret) override { return tables(luks::open(reg_, *header_, secret)); }
    Result<dm::DmTable> unlock_volume_key(ConstBytes key) override {
        return tables(luks::open_with_volume_key(reg_, *header_, key));
    }
    const SecureBuffer& volume_key() const override { return key_; }
    const std::vector<dm::NamedDmTable>& lower_tables() const override { return lower_; }

private:
    Result<dm::DmTable> tables(Result<luks::Volume> vol) {
        if (!vol) return vol.error();
        if (vol->integrity) {
            // Two tables, as cryptsetup stacks them; named as
            // systemd-cryptsetup names a LUKS mapping.
            auto tables = luks::integrity_tables(*vol, *image_, path_, "luks-" + vol->uuid);
            if (!tables) return tables.error();
            dm::DmTable top = std::move(tables->back().table);
            tables->pop_back();
            lower_ = std::move(tables).value();
            key_ = vol->table.key;
            return top;
        }
        auto table = luks::dm_table(*vol, *image_, path_);
        if (!table) return table.error();
        lower_.clear();
        key_ = vol->table.key;
        return table;
    }

    Registry& reg_;
    std::shared_ptr<BackingStore> image_, header_;
    std::string path_, header_path_;
    luks::Version version_;
    SecureBuffer key_;
    std::vector<dm::NamedDmTable> lower_;
};

// What the formats with one metadata struct share: the image, its metadata
// read once, and the volume key once unlocked.
template <typename Metadata>
class MetadataContainer : public Container {
public:
    MetadataContainer(Registry& reg, std::shared_ptr<BackingStore> image, std::string path, Metadata md)
        : reg_(reg), image_(std::move(image)), path_(std::move(path)), md_(std::move(md)) {}
    const SecureBuffer& volume_key() const override { return key_; }

protected:
    Registry& reg_;
    std::shared_ptr<BackingStore> image_;
    std::string path_;
    Metadata md_;
    SecureBuffer key_;
};

class BitlkContainer final : public MetadataContainer<bitlk::Metadata> {
public:
    using MetadataContainer::MetadataContainer;
    Format format() const override { return Format::Bitlk; }
    Result<std::string> dump(bool json) const override {
        if (json) return make_error(Status::Unsupported, "BitLocker metadata has no JSON form");
        return bitlk::dump(md_, path_);
    }
    Result<dm::DmTable> unlock(ConstBytes secret) override {
        auto u = secret.empty() ? bitlk::unlock_clear_key(reg_, md_) : bitlk::unlock(reg_, md_, secret);
        if (!u) return u.error();
        return unlock_volume_key(u->key);
    }
    Result<dm::DmTable> unlock_volume_key(ConstBytes key) override {
        auto table = bitlk::dm_table(md_, key, image_->size() / 512, path_);
        if (!table) return table.error();
        key_ = SecureBuffer(key);
        return table;
    }
};

class Fvault2Container final : public MetadataContainer<fvault2::Metadata> {
public:
    using MetadataContainer::MetadataContainer;
    Format format() const override { return Format::Fvault2; }
    Result<std::string> dump(bool json) const override {
        if (json) return make_error(Status::Unsupported, "FileVault 2 metadata has no JSON form");
        return fvault2::dump(md_, path_);
    }
    Result<dm::DmTable> unlock(ConstBytes secret) override {
        auto key = fvault2::unlock(reg_, md_, secret);
        if (!key) return key.error();
        return unlock_volume_key(*key);
    }
    Result<dm::DmTable> unlock_volume_key(ConstBytes key) override {
        auto table = fvault2::dm_table(md_, key, image_->size(), path_);
        if (!table) return table.error();
        key_ = SecureBuffer(key);
        return table;
    }
};

}  // namespace

Result<std::unique_ptr<Container>> open(Registry& reg, const std::string& image, const std::string& header) {
    auto store = open_store(image, false);
    if (!store) return store.error();
    std::shared_ptr<BackingStore> head = *store;
    if (!header.empty()) {
        auto h = open_store(header, false);
        if (!h) return h.error();
        head = *h;
    }
    auto format = detect(*head);
    if (!format) return format.error();
    switch (*format) {
    case Format::Luks1:
    case Format::Luks2:
        return std::unique_ptr<Container>(std::make_unique<LuksContainer>(
            reg, *store, head, image, header.empty() ? image : header,
            *format == Format::Luks1 ? luks::Version::Luks1 : luks::Version::Luks2));
    case Format::Bitlk: {
        auto md = bitlk::read_metadata(reg, **store);
        if (!md) return md.error();
        return std::unique_ptr<Container>(std::make_unique<BitlkContainer>(reg, *store, image, std::move(md).value()));
    }
    case Format::Fvault2: {
        auto md = fvault2::read_metadata(reg, **store);
        if (!md) return md.error();
        return std::unique_ptr<Container>(
            std::make_unique<Fvault2Container>(reg, *store, image, std::move(md).value()));
    }
    case Format::Verity:
        return make_error(Status::Unsupported, image + ": a dm-verity superblock has no secret to unlock "
                                                       "(blkcrypt verity opens it with its root hash)");
    case Format::Integrity:
        break;
    }
    return make_error(Status::Unsupported, image + ": a dm-integrity superblock has no secret to unlock "
                                                   "(blkcrypt integrity dump reads it)");
}

}  // namespace blkcrypt::containers
