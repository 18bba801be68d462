// A mirror client written from fixture/mirror/protocol.md alone, in Java (java.nio.file): what a
// user of evlab would hand it. Packed into a jar and run as `java -jar mirror.jar SRC DST`.
// A changed file is copied under a hidden temporary name in its folder, given the source's
// modification time, then renamed over its final name; a file of the same size and
// modification time as its copy is left alone, unread.

import java.io.IOException;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.stream.Stream;

public class Mirror {
    static final LinkOption NOFOLLOW = LinkOption.NOFOLLOW_LINKS;

    enum Kind { NONE, LINK, DIR, FILE }

    static Kind kind(Path p) {
        if (Files.isSymbolicLink(p)) return Kind.LINK;
        if (Files.isDirectory(p, NOFOLLOW)) return Kind.DIR;
        if (Files.exists(p, NOFOLLOW)) return Kind.FILE;
        return Kind.NONE;
    }

    static void remove(Path p) throws IOException {
        if (kind(p) == Kind.DIR) {
            try (Stream<Path> all = Files.walk(p)) {
                List<Path> paths = new ArrayList<>();
                all.forEach(paths::add);
                paths.sort(Comparator.reverseOrder());   // children before their folder
                for (Path q : paths) Files.delete(q);
            }
        } else {
            Files.deleteIfExists(p);
        }
    }

    static Path temp(Path d) {
        return d.resolveSibling("." + d.getFileName() + ".mirror-tmp");
    }

    static void copyFile(Path s, Path d) throws IOException {
        BasicFileAttributes sa = Files.readAttributes(s, BasicFileAttributes.class, NOFOLLOW);
        if (kind(d) == Kind.FILE) {
            BasicFileAttributes da = Files.readAttributes(d, BasicFileAttributes.class, NOFOLLOW);
            if (da.size() == sa.size() && da.lastModifiedTime().equals(sa.lastModifiedTime()))
                return;   // unchanged: neither read nor written
        } else if (kind(d) != Kind.NONE) {
            remove(d);
        }
        Path tmp = temp(d);
        Files.deleteIfExists(tmp);
        Files.copy(s, tmp, NOFOLLOW);
        Files.setLastModifiedTime(tmp, sa.lastModifiedTime());
        Files.move(tmp, d, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
    }

    static void copyLink(Path s, Path d) throws IOException {
        Path text = Files.readSymbolicLink(s);
        if (kind(d) == Kind.LINK && Files.readSymbolicLink(d).equals(text)) return;
        if (kind(d) == Kind.DIR) remove(d);
        Path tmp = temp(d);
        Files.deleteIfExists(tmp);
        Files.createSymbolicLink(tmp, text);
        Files.move(tmp, d, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
    }

    public static void main(String[] args) throws IOException {
        Path src = Paths.get(args[0]), dst = Paths.get(args[1]);
        Files.createDirectories(dst);
        Files.walkFileTree(src, new SimpleFileVisitor<Path>() {
            @Override
            public FileVisitResult preVisitDirectory(Path dir, BasicFileAttributes a)
                    throws IOException {
                Path d = dst.resolve(src.relativize(dir).toString());
                if (kind(d) != Kind.DIR && kind(d) != Kind.NONE) remove(d);
                if (kind(d) == Kind.NONE) Files.createDirectory(d);
                return FileVisitResult.CONTINUE;
            }

            @Override
            public FileVisitResult visitFile(Path f, BasicFileAttributes a) throws IOException {
                Path d = dst.resolve(src.relativize(f).toString());
                if (a.isSymbolicLink()) copyLink(f, d);
                else copyFile(f, d);
                return FileVisitResult.CONTINUE;
            }
        });
        // what DST holds that SRC lacks, deepest first
        List<Path> extra = new ArrayList<>();
        try (Stream<Path> all = Files.walk(dst)) {
            all.filter(d -> !d.equals(dst))
               .filter(d -> kind(src.resolve(dst.relativize(d).toString())) == Kind.NONE)
               .forEach(extra::add);
        }
        extra.sort(Comparator.reverseOrder());
        for (Path d : extra) remove(d);
        System.out.println("{\"claim\": \"completed\"}");
    }
}
