/*
 * Backs tcmalloc's heap with transparent huge pages, linked into the simulators (not into the
 * sanitizer build, which has its own allocator).
 *
 * Why: at thousands of NICs every packet-hop touches a port, a link, a switch and a QP last
 * used long ago, so each hop is a chain of cache misses, and with 4 KiB pages each of those
 * also misses the TLB (a ~1 GiB working set is 250k pages). On a virtual machine a TLB miss
 * walks two page tables. Kernels whose THP mode is "madvise" (Debian's default) only give
 * huge pages to memory that asks for them, and tcmalloc does not ask. Results do not depend
 * on addresses, so they are unchanged; only the wall time moves. METAROCE_HUGE_PAGES=0 turns
 * it off (to measure the difference, or where huge pages misbehave); 1 (the default) on.
 */
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <gperftools/malloc_extension.h>
#include <iostream>
#include <sys/mman.h>

namespace
{

constexpr std::size_t kHuge = std::size_t(2) << 20;

class HugePageAllocator : public SysAllocator
{
  public:
    explicit HugePageAllocator(SysAllocator* fallback)
        : m_fallback(fallback)
    {
    }

    void* Alloc(std::size_t size, std::size_t* actualSize, std::size_t alignment) override
    {
        std::size_t align = alignment > kHuge ? alignment : kHuge;
        std::size_t bytes = (size + kHuge - 1) & ~(kHuge - 1);
        // Over-map by one alignment unit, then return the unaligned ends to the kernel.
        void* raw = mmap(nullptr, bytes + align, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (raw == MAP_FAILED)
        {
            return m_fallback ? m_fallback->Alloc(size, actualSize, alignment) : nullptr;
        }
        auto begin = reinterpret_cast<std::uintptr_t>(raw);
        std::uintptr_t aligned = (begin + align - 1) & ~(std::uintptr_t(align) - 1);
        if (aligned > begin)
        {
            munmap(raw, aligned - begin);
        }
        std::uintptr_t end = begin + bytes + align;
        if (end > aligned + bytes)
        {
            munmap(reinterpret_cast<void*>(aligned + bytes), end - (aligned + bytes));
        }
        madvise(reinterpret_cast<void*>(aligned), bytes, MADV_HUGEPAGE); // advice: may be ignored
        if (actualSize)
        {
            *actualSize = bytes;
        }
        return reinterpret_cast<void*>(aligned);
    }

  private:
    SysAllocator* m_fallback;
};

struct Install
{
    Install()
    {
        const char* env = std::getenv("METAROCE_HUGE_PAGES");
        if (env && std::strcmp(env, "0") != 0 && std::strcmp(env, "1") != 0)
        {
            std::cerr << "error: METAROCE_HUGE_PAGES: '" << env << "' is not 0 or 1\n";
            std::exit(2);
        }
        if (env && std::strcmp(env, "0") == 0)
        {
            return;
        }
        MallocExtension* ext = MallocExtension::instance();
        static HugePageAllocator allocator(ext->GetSystemAllocator());
        ext->SetSystemAllocator(&allocator);
    }
} g_install;

} // namespace
