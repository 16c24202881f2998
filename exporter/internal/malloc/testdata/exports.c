// A program that exports (link with -rdynamic) the entry points of an allocator built into
// it, chosen by -D: what exeAllocator recognises in an executable's dynamic symbols.
#include <stddef.h>
#include <unistd.h>

#ifdef JEMALLOC
int mallctl(const char *name, void *old, size_t *oldlen, void *new, size_t newlen) { return 0; }
#endif
#ifdef TCMALLOC
void *tc_malloc(size_t n) { return NULL; }
#endif
#ifdef MIMALLOC
void *mi_malloc(size_t n) { return NULL; }
#endif
#ifdef OWN_MALLOC
extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
void *malloc(size_t n) { return __libc_malloc(n); }
void free(void *p) { __libc_free(p); }
#endif

int main(void) {
	pause();
	return 0;
}
