// The registry: a list of algorithms, a table of templates, and the
// in-flight constructions that make concurrent lookups of a new template
// name wait for one another (the kernel's larvals).
#include "alg_record.hpp"

#include <blkcrypt/alg_name.hpp>
#include <blkcrypt/internal/alg.hpp>
#include <blkcrypt/internal/template.hpp>
#include <blkcrypt/internal/testvec.hpp>
#include <blkcrypt/registry.hpp>

#include <algorithm>
#include <future>
#include <map>
#include <mutex>
#include <set>

namespace blkcrypt {

bool usable_as(AlgType have, AlgType want) noexcept {
    return have == want || (want == AlgType::Skcipher && have == AlgType::Cipher) ||
           (want == AlgType::Ahash && have == AlgType::Shash);
}


namespace {

struct Entry {
    std::shared_ptr<Alg> alg;
    SelftestState state = SelftestState::Pending;
    std::string message;
    const Template* origin = nullptr;  // the template that made this instance
};


AlgStatus status_of(const Entry& e) {
    AlgStatus s;
    s.info = e.alg->info();
    s.selftest = e.state;
    s.selftest_message = e.message;
    s.refcnt = 1 + detail::record_of(*e.alg).users.load();
    s.superseded = detail::record_of(*e.alg).superseded.load();
    return s;
}

bool visible(const Entry& e) {
    return e.state == SelftestState::Passed || e.state == SelftestState::NoVectors;
}

}  // namespace

struct Registry::Impl {
    SelftestFn selftest;
    mutable std::mutex mu;
    std::vector<Entry> algs;
    std::map<std::string, std::shared_ptr<Template>, std::less<>> templates;
    std::map<std::string, std::shared_future<Result<void>>, std::less<>> inflight;
    std::map<std::string, std::shared_ptr<void>, std::less<>> attachments;
    // Pending self-tests under way; a second thread wanting the same
    // algorithm waits for the first one's outcome.
    std::map<const Alg*, std::shared_future<void>> testing;

    // Under mu. type == nullptr: any type.
    struct Found {
        std::shared_ptr<const Alg> alg;
        std::shared_ptr<Alg> untested;  // the choice, once its pending self-test passes
        std::string why_not;  // when alg is null but the name exists
        Status status = Status::NotFound;  // SelftestFailed when that is why
    };

    Found find(std::string_view name, const AlgType* type) const {
        Found f;
        for (const auto& e : algs) {
            const AlgInfo& in = e.alg->info();
            if (in.driver != name) continue;
            if (e.state == SelftestState::Failed) {
                f.why_not = "driver '" + in.driver + "' failed its self-test: " + e.message;
                f.status = Status::SelftestFailed;
                return f;
            }
            if (type && !usable_as(in.type, *type)) {
                f.why_not = "'" + std::string(name) + "' is " + article(in.type) + ", not " +
                            article(*type);
                return f;
            }
            if (e.state == SelftestState::Pending) f.untested = e.alg;
            else f.alg = e.alg;
            return f;
        }
        const Entry* best = nullptr;
        for (const auto& e : algs) {
            const AlgInfo& in = e.alg->info();
            if (in.name != name) continue;
            if (e.state == SelftestState::Failed) {
                if (f.why_not.empty()) {
                    f.why_not = "'" + std::string(name) + "': driver '" + in.driver +
                                "' failed its self-test: " + e.message;
                    f.status = Status::SelftestFailed;
                }
                continue;
            }
            if (type && !usable_as(in.type, *type)) {
                f.why_not = "'" + std::string(name) + "' is " + article(in.type) + ", not " +
                            article(*type);
                f.status = Status::NotFound;
                continue;
            }
            if (detail::record_of(*e.alg).superseded.load()) continue;
            if (!best || in.priority > best->alg->info().priority) best = &e;
        }
        if (best) {
            // A pending choice is tested first: if it fails, the next best is chosen.
            if (best->state == SelftestState::Pending) f.untested = best->alg;
            else f.alg = best->alg;
            f.why_not.clear();
            f.status = Status::NotFound;
        }
        return f;
    }

    // Holding lk (on mu), and again on return: runs alg's pending quick
    // self-test once however many threads ask at the same time, and records
    // the outcome (unless alg was unregistered meanwhile). The test runs
    // outside the lock: it may take a while and may look up other algorithms.
    void test_pending(std::unique_lock<std::mutex>& lk, const std::shared_ptr<Alg>& alg) {
        if (auto it = testing.find(alg.get()); it != testing.end()) {
            auto fut = it->second;
            lk.unlock();
            fut.wait();
            lk.lock();
            return;
        }
        std::promise<void> done;
        testing.emplace(alg.get(), done.get_future().share());
        lk.unlock();
        SelftestOutcome t;
        try {
            if (selftest) t = selftest(*alg, false);
        } catch (const std::exception& e) {  // else the waiters would wait forever
            t = {SelftestState::Failed, std::string("self-test threw: ") + e.what()};
        }
        if (t.state == SelftestState::Pending) t.state = SelftestState::NoVectors;  // ran, said nothing
        lk.lock();
        for (auto& e : algs)
            if (e.alg == alg && e.state == SelftestState::Pending) {
                e.state = t.state;
                e.message = t.message;
            }
        testing.erase(alg.get());
        done.set_value();
    }

    // find(), testing the pending choices first: a choice that fails its
    // self-test drops out and the next best is found.
    Found find_tested(std::unique_lock<std::mutex>& lk, std::string_view name, const AlgType* type) {
        for (;;) {
            Found f = find(name, type);
            if (!f.untested) return f;
            test_pending(lk, f.untested);
        }
    }

    static std::string article(AlgType t) {
        std::string s = to_string(t);
        return (s[0] == 'a' ? "an " : "a ") + s;
    }

    bool driver_taken(const AlgInfo& in, std::string* why) const {
        for (const auto& e : algs) {
            const AlgInfo& o = e.alg->info();
            if (o.driver == in.driver) {
                *why = "driver name '" + in.driver + "' is already registered";
                return true;
            }
            if (o.driver == in.name && o.name != in.name) {
                *why = "generic name '" + in.name + "' is another algorithm's driver name";
                return true;
            }
            if (o.name == in.driver && in.name != in.driver) {
                *why = "driver name '" + in.driver + "' is another algorithm's generic name";
                return true;
            }
        }
        return false;
    }

    // Under mu: whether some instance is built on a lower-priority algorithm
    // of better's name (so registering better would supersede it).
    bool supersedes_any(const Alg& better) const {
        for (const auto& e : algs)
            for (const auto& s : detail::record_of(*e.alg).spawns)
                if (s->info().name == better.info().name &&
                    s->info().priority < better.info().priority)
                    return true;
        return false;
    }

    // Under mu: instances built on a lower-priority algorithm of this name,
    // and everything built on them, are no longer offered to generic lookups.
    void supersede_for(const Alg& better) {
        std::set<const Alg*> stale;
        for (const auto& e : algs)
            for (const auto& s : detail::record_of(*e.alg).spawns)
                if (s->info().name == better.info().name &&
                    s->info().priority < better.info().priority)
                    stale.insert(e.alg.get());
        propagate(stale);
        for (const auto& e : algs)
            if (stale.count(e.alg.get())) detail::record_of(*e.alg).superseded = true;
    }

    // Grow `set` with everything that depends on a member, transitively.
    void propagate(std::set<const Alg*>& set) const {
        for (bool grew = true; grew;) {
            grew = false;
            for (const auto& e : algs) {
                if (set.count(e.alg.get())) continue;
                for (const auto& s : detail::record_of(*e.alg).spawns)
                    if (set.count(s.get())) {
                        set.insert(e.alg.get());
                        grew = true;
                        break;
                    }
            }
        }
    }

    void erase_with_dependants(std::set<const Alg*> gone) {
        propagate(gone);
        std::erase_if(algs, [&](const Entry& e) { return gone.count(e.alg.get()) > 0; });
    }
};

// The self-tests use this registry's vectors (compiled-in, and its plugins').
Registry::Registry()
    : Registry(SelftestFn([this](const Alg& alg, bool full) { return run_testmgr(*this, alg, full); })) {}

Registry::Registry(SelftestFn selftest) : impl_(std::make_unique<Impl>()) {
    impl_->selftest = std::move(selftest);
}

Registry::~Registry() = default;

namespace {
Result<void> check_names(const AlgInfo& in) {
    auto n = AlgName::parse(in.name);
    if (!n) return n.error();
    auto d = AlgName::parse(in.driver);
    if (!d) return d.error();
    return {};
}
}  // namespace

static Result<void> register_entry(Registry::Impl& im, std::shared_ptr<Alg> alg,
                                   const Template* origin) {
    if (!alg) return make_error(Status::Invalid, "register: null algorithm");
    if (auto r = check_names(alg->info()); !r) return r;
    // The self-test waits for the first lookup that would return the
    // algorithm (Impl::find_tested), so a command pays only for what it uses.
    // Registering over existing instances built on a worse algorithm of the
    // same name is the exception: whether they are superseded depends on the
    // outcome, so the test runs now (outside the lock: it may take a while).
    SelftestOutcome t{im.selftest ? SelftestState::Pending : SelftestState::NoVectors, {}};
    std::string why;
    for (bool tested = !im.selftest;; tested = true) {
        {
            std::lock_guard lk(im.mu);
            if (im.driver_taken(alg->info(), &why)) return make_error(Status::Invalid, why);
            if (tested || !im.supersedes_any(*alg)) {
                im.algs.push_back(Entry{alg, t.state, t.message, origin});
                if (visible(im.algs.back())) im.supersede_for(*alg);
                return {};
            }
        }
        t = im.selftest(*alg, false);
        if (t.state == SelftestState::Pending) t.state = SelftestState::NoVectors;
    }
}

std::shared_ptr<void>& Registry::attachment(std::string_view key) {
    std::lock_guard lk(impl_->mu);
    return impl_->attachments[std::string(key)];
}

Result<void> Registry::register_alg(std::shared_ptr<Alg> alg) {
    return register_entry(*impl_, std::move(alg), nullptr);
}

Result<void> Registry::register_algs(std::span<const std::shared_ptr<Alg>> algs) {
    for (std::size_t i = 0; i < algs.size(); ++i) {
        if (auto r = register_alg(algs[i]); !r) {
            for (std::size_t j = 0; j < i; ++j) (void)unregister_alg(algs[j]->info().driver);
            return r;
        }
    }
    return {};
}

Result<void> Registry::unregister_alg(std::string_view driver) {
    std::lock_guard lk(impl_->mu);
    for (const auto& e : impl_->algs)
        if (e.alg->info().driver == driver) {
            impl_->erase_with_dependants({e.alg.get()});
            return {};
        }
    return make_error(Status::NotFound, "no registered driver '" + std::string(driver) + "'");
}

Result<void> Registry::register_template(std::shared_ptr<Template> tmpl) {
    return register_templates(std::span(&tmpl, 1));
}

Result<void> Registry::register_templates(std::span<const std::shared_ptr<Template>> tmpls) {
    std::lock_guard lk(impl_->mu);
    std::set<std::string_view> seen;
    for (const auto& t : tmpls) {
        if (!t) return make_error(Status::Invalid, "register: null template");
        auto n = AlgName::parse(t->name());
        if (!n || n->is_template())
            return make_error(Status::Invalid, "bad template name '" + std::string(t->name()) + "'");
        if (impl_->templates.count(t->name()) || !seen.insert(t->name()).second)
            return make_error(Status::Invalid,
                              "template '" + std::string(t->name()) + "' is already registered");
    }
    for (const auto& t : tmpls) impl_->templates.emplace(std::string(t->name()), t);
    return {};
}

void Registry::unregister_templates(std::span<const std::shared_ptr<Template>> tmpls) {
    std::lock_guard lk(impl_->mu);
    std::set<const Alg*> gone;
    for (const auto& t : tmpls) {
        auto it = impl_->templates.find(t->name());
        if (it == impl_->templates.end() || it->second != t) continue;
        impl_->templates.erase(it);
        for (const auto& e : impl_->algs)
            if (e.origin == t.get()) gone.insert(e.alg.get());
    }
    impl_->erase_with_dependants(std::move(gone));
}

namespace {
Result<std::shared_ptr<const Alg>> lookup_impl(Registry& reg, Registry::Impl& im,
                                               std::string_view text, const AlgType* type) {
    auto parsed = AlgName::parse(text);
    if (!parsed) return parsed.error();
    const std::string key = parsed->str();
    for (;;) {
        std::unique_lock lk(im.mu);
        auto found = im.find_tested(lk, key, type);
        if (found.alg) return found.alg;
        // A template name whose registered drivers all failed (or have the
        // wrong type) may still be built from its parts.
        if (!parsed->is_template())
            return make_error(found.status, found.why_not.empty()
                                                ? "unknown algorithm '" + key + "'"
                                                : found.why_not);
        if (auto it = im.inflight.find(key); it != im.inflight.end()) {
            auto fut = it->second;
            lk.unlock();
            if (auto r = fut.get(); !r) return r.error();
            continue;  // built by another thread: find it
        }
        auto tit = im.templates.find(parsed->base());
        if (tit == im.templates.end())
            return make_error(Status::NotFound, "unknown template '" + parsed->base() + "' in '" +
                                                    key + "'");
        std::shared_ptr<Template> tmpl = tit->second;
        std::promise<Result<void>> done;
        im.inflight.emplace(key, done.get_future().share());
        lk.unlock();

        Result<void> outcome;
        std::shared_ptr<const Alg> made;
        auto inst = tmpl->create(reg, *parsed);
        if (!inst) {
            outcome = inst.error();
        } else {
            std::shared_ptr<Alg> alg = std::move(inst.value());
            if (tmpl->module_handle) {  // built by a plugin's code
                alg->set_module(tmpl->module);
                alg = bind_module(std::move(alg), tmpl->module_handle);
            }
            auto r = register_entry(im, alg, tmpl.get());
            std::unique_lock lk2(im.mu);
            auto again = im.find_tested(lk2, alg->info().driver, nullptr);
            if (again.alg)
                made = again.alg;  // ours, or an identical one that won a race
            else if (!again.why_not.empty())  // e.g. an earlier instance failed its self-test
                outcome = make_error(again.status, again.why_not);
            else if (!r)
                outcome = r.error();
            else
                outcome = make_error(Status::NotFound, "'" + key + "' was not registered");
        }
        {
            std::lock_guard lk2(im.mu);
            im.inflight.erase(key);
        }
        done.set_value(outcome);
        if (!outcome) return outcome.error();
        if (type && !usable_as(made->info().type, *type))
            return make_error(Status::NotFound, "'" + key + "' is " +
                                                    Registry::Impl::article(made->info().type) +
                                                    ", not " + Registry::Impl::article(*type));
        return made;
    }
}
}  // namespace

Result<std::shared_ptr<const Alg>> Registry::lookup(std::string_view name, AlgType type) {
    return lookup_impl(*this, *impl_, name, &type);
}

Result<std::shared_ptr<const Alg>> Registry::lookup_any(std::string_view name) {
    return lookup_impl(*this, *impl_, name, nullptr);
}

Result<AlgInfo> Registry::describe(std::string_view name) {
    auto r = lookup_any(name);
    if (!r) return r.error();
    return (*r)->info();
}

std::vector<AlgStatus> Registry::list() const {
    std::lock_guard lk(impl_->mu);
    std::vector<AlgStatus> out;
    out.reserve(impl_->algs.size());
    for (const auto& e : impl_->algs) out.push_back(status_of(e));
    return out;
}

std::vector<std::string> Registry::template_names() const {
    std::lock_guard lk(impl_->mu);
    std::vector<std::string> out;
    for (const auto& [name, t] : impl_->templates) out.push_back(name);
    return out;
}

std::vector<AlgStatus> Registry::run_selftests(std::span<const std::string> names) {
    std::vector<std::shared_ptr<Alg>> todo;
    {
        std::lock_guard lk(impl_->mu);
        for (const auto& e : impl_->algs) {
            const AlgInfo& in = e.alg->info();
            bool want = names.empty() || std::any_of(names.begin(), names.end(), [&](auto& n) {
                            return n == in.name || n == in.driver;
                        });
            if (want) todo.push_back(e.alg);
        }
    }
    std::vector<AlgStatus> out;
    for (const auto& alg : todo) {
        SelftestOutcome t;
        if (impl_->selftest) t = impl_->selftest(*alg, true);
        std::lock_guard lk(impl_->mu);
        for (auto& e : impl_->algs)
            if (e.alg == alg) {
                e.state = t.state;
                e.message = t.message;
                out.push_back(status_of(e));
            }
    }
    return out;
}

}  // namespace blkcrypt
