"""
./quickstart in a tree that was configured in place ("./configure && make"
run in the checkout itself, as many users do first): automake cannot
configure such a tree again in build/, so quickstart must say so before it
installs or builds anything, and what the in-place build made must be
ignored by git (./quickstart package copies what git does not ignore).

Works on a copy of this checkout's sources (git's files), configured and
built in place; skipped where the sources are not a git checkout (a
distribution tarball: distcheck).
"""

import os
import shutil
import subprocess
import tempfile
import unittest

from harness import SRCDIR

# A make of our own, not a job of the make check that runs us.
ENV = {k: v for k, v in os.environ.items()
       if k not in ('MAKEFLAGS', 'MFLAGS', 'MAKELEVEL', 'BUILD_DIR',
                    'CONFIGURE_FLAGS', 'DEB_DIR')}
GIT = ['git', '-c', 'user.name=test', '-c', 'user.email=test@localhost',
       '-c', 'init.defaultBranch=main', '-c', 'advice.detachedHead=false']
# What autogen.sh makes, copied (with their times) so the copy need not
# run autoreconf; quickstart reruns it if configure.ac is newer.
GENERATED = ('configure', 'aclocal.m4', 'config.h.in', 'build-aux', 'm4')


def run(cmd, cwd, timeout=600, env=ENV):
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def checked(cmd, cwd, timeout=600):
    p = run(cmd, cwd, timeout)
    if p.returncode != 0:
        raise AssertionError('%s failed (%d):\n%s%s' %
                             (' '.join(cmd), p.returncode,
                              p.stdout[-3000:], p.stderr[-3000:]))
    return p


class InPlaceTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        if shutil.which('git') is None:
            raise unittest.SkipTest('git is not installed')
        # The top of a checkout; not a tarball unpacked inside one.
        top = run(['git', 'rev-parse', '--show-toplevel'], SRCDIR)
        if top.returncode != 0 or \
                os.path.realpath(top.stdout.strip()) != \
                os.path.realpath(SRCDIR):
            raise unittest.SkipTest('%s is not a git checkout' % SRCDIR)
        files = checked(['git', 'ls-files', '-z', '-co',
                         '--exclude-standard'], SRCDIR)
        cls.tmp = tempfile.mkdtemp(prefix='corral-inplace-')
        cls.top = os.path.join(cls.tmp, 'corral')
        try:
            cls.copy(files.stdout.split('\0'))
            checked(GIT + ['init', '-q'], cls.top)
            checked(GIT + ['add', '-A'], cls.top)
            checked(GIT + ['commit', '-qm', 'sources'], cls.top)
            if not os.path.exists(os.path.join(cls.top, 'configure')):
                checked(['./autogen.sh'], cls.top)
            checked(['./configure'], cls.top, 120)
        except BaseException:
            shutil.rmtree(cls.tmp, ignore_errors=True)
            raise

    @classmethod
    def copy(cls, names):
        for name in [n for n in names if n] + list(GENERATED):
            src = os.path.join(SRCDIR, name)
            dst = os.path.join(cls.top, name)
            if os.path.isdir(src) and not os.path.islink(src):
                shutil.copytree(src, dst, symlinks=True)
            elif os.path.lexists(src):
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                shutil.copy2(src, dst, follow_symlinks=False)
        # automake's inputs, so make does not rerun automake.
        for d, _, fs in os.walk(SRCDIR):
            rel = os.path.relpath(d, SRCDIR)
            if rel != '.' and rel.split(os.sep)[0].startswith(('build',
                                                                '.')):
                continue
            for f in fs:
                if f == 'Makefile.in':
                    os.makedirs(os.path.join(cls.top, rel), exist_ok=True)
                    shutil.copy2(os.path.join(d, f),
                                 os.path.join(cls.top, rel, f))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_build_dir_elsewhere_is_refused_with_advice(self):
        other = os.path.join(self.tmp, 'elsewhere')
        env = dict(ENV, BUILD_DIR=other)
        p = run(['./quickstart', 'test'], self.top, 60, env)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn('was configured in place', p.stderr)
        self.assertIn("'make distclean'", p.stderr)
        # Refused before anything was installed, configured or built.
        self.assertNotIn('installing', p.stdout)
        self.assertFalse(os.path.exists(os.path.join(other, 'Makefile')))

    def test_package_without_git_is_refused(self):
        git = os.path.join(self.top, '.git')
        aside = os.path.join(self.tmp, 'git-aside')
        os.rename(git, aside)
        try:
            p = run(['./quickstart', 'package'], self.top, 60)
        finally:
            os.rename(aside, git)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn('was configured in place', p.stderr)
        self.assertIn("'make distclean'", p.stderr)
        self.assertNotIn('installing', p.stdout)
        self.assertFalse(os.path.exists(os.path.join(self.top, 'build-deb')))

    def test_in_place_build_products_are_ignored(self):
        # Everything make and make check build (check's programs without
        # running them): what quickstart package would copy stays sources.
        checked(['make', '-j2'], self.top)
        checked(['make', '-j2', 'check', 'TESTS='], self.top)
        p = checked(['git', 'status', '--porcelain',
                     '--untracked-files=all'], self.top)
        self.assertEqual(p.stdout.splitlines(), [],
                         'built in place but not in .gitignore')
        p = checked(['git', 'ls-files', '-co', '--exclude-standard'],
                    self.top)
        for product in ('config.status', 'Makefile', 'corral',
                        'corralctl', 'man/corral.8'):
            self.assertTrue(os.path.exists(os.path.join(self.top, product)),
                            product)
            self.assertNotIn(product, p.stdout.splitlines())


if __name__ == '__main__':
    unittest.main()
