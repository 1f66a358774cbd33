# cython: language_level=3
# path:
#   with the GIL: mutex_lock_gil -> pthread_mutex_trylock -> (busy, GIL released) pthread_mutex_lock

# A plain process-private mutex, as inline C, for the lock taken once per record (the accumulator's):
# an uncontended lock and unlock is a few dozen instructions, where the interpreter's thread lock
# (a semaphore behind PyThread_acquire_lock) about two hundred (callgrind). Rules:
# - the thread that locks it unlocks it (a normal pthread mutex);
# - with the GIL, lock it with mutex_lock_gil, which gives the GIL up only while it waits;
# - never take the GIL while holding it.

cdef extern from "<pthread.h>" nogil:
    ctypedef struct pthread_mutex_t:
        pass
    ctypedef struct pthread_mutexattr_t:
        pass
    int pthread_mutex_init(pthread_mutex_t *m, const pthread_mutexattr_t *attr)
    int pthread_mutex_destroy(pthread_mutex_t *m)
    int pthread_mutex_lock(pthread_mutex_t *m)
    int pthread_mutex_trylock(pthread_mutex_t *m)
    int pthread_mutex_unlock(pthread_mutex_t *m)


# Lock ``m`` from a thread holding the GIL: at once when it is free, otherwise without the GIL
# while waiting (its holder may need the GIL to finish).
cdef inline void mutex_lock_gil(pthread_mutex_t *m) noexcept:
    if pthread_mutex_trylock(m) != 0:
        with nogil:
            pthread_mutex_lock(m)
