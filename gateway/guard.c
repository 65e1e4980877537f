/*
 * guard — see guard.h. Each side is tokenized into a fixed buffer on the stack (no heap),
 * every token looked up once in a lexicon hashed at first use, then the rules run over the
 * two token arrays. Everything is ASCII-only in its case handling: bytes >= 0x80 are word
 * bytes and compare as they are.
 */
#include "guard.h"

#include <ctype.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------
 * Lexicon. Words are space-separated; each string of contrast_groups is a set whose
 * members contrast with each other (a pair of antonyms is a set of two), each string of
 * synonym_groups a set of words that may replace each other. Entries are base forms: the
 * lookup also tries a token without -s/-es, -ing, -ed, -er, -est, -ly (with a doubled
 * consonant undone or an e restored), so "larger", "enabled", "stopping" find large,
 * enable, stop. A word may sit in several groups ("right": left/right, right/wrong).
 * --------------------------------------------------------------------------------------- */

/* clang-format off */
/* Countries: any two differ (a group of contrast_groups); a name one begins ("India",
 * "Indiana") is another (rule_longer_name()). */
#define COUNTRIES \
    "afghanistan albania algeria argentina armenia australia austria azerbaijan bangladesh " \
    "belarus belgium bolivia brazil bulgaria cambodia cameroon canada chile china colombia " \
    "croatia cuba cyprus czechia denmark ecuador egypt england estonia ethiopia finland france " \
    "germany ghana greece hungary iceland india indonesia iran iraq ireland israel italy " \
    "jamaica japan kazakhstan kenya korea latvia lebanon libya lithuania luxembourg malaysia " \
    "mexico mongolia morocco nepal netherlands nigeria norway pakistan panama peru philippines " \
    "poland portugal romania russia scotland serbia singapore slovakia slovenia somalia spain " \
    "sudan sweden switzerland syria taiwan tanzania thailand tunisia uganda ukraine uruguay " \
    "venezuela vietnam wales yemen zimbabwe niger chad mali guinea congo rwanda senegal qatar " \
    "oman kuwait jordan bahrain nicaragua honduras guatemala paraguay haiti bhutan laos " \
    "myanmar angola namibia botswana zambia mozambique madagascar malta monaco andorra " \
    "liechtenstein montenegro kosovo moldova brunei fiji samoa tonga bahamas barbados belize " \
    "dominica macedonia bosnia eritrea djibouti gabon benin togo burundi malawi lesotho " \
    "liberia gambia mauritania mauritius seychelles maldives tajikistan kyrgyzstan " \
    "turkmenistan uzbekistan georgia"

static const char *const contrast_groups[] = {
    /* verbs: actions and their inverse */
    /* a capital is often not the largest city */
    "capital largest", "capital biggest", "born die", "birth death",
    "boot exit", "backup restore", "thicken thin", "delete deactivate", "wash dry",
    "remove find", "delete find", "remove count", "delete count", "squash split",
    "earn spend", "earn redeem", "earn use", "earn pay", "within after", "within beyond",
    "enable disable", "install uninstall", "install remove", "buy sell", "increase decrease",
    "increase reduce", "add remove", "add subtract", "add delete", "open close", "open shut",
    "start stop", "start finish", "begin end", "begin finish", "encrypt decrypt",
    "encode decode", "compress decompress", "zip unzip", "lock unlock", "mount unmount",
    "load unload", "upload download", "import export", "push pull", "push pop", "send receive",
    "accept reject", "accept decline", "allow deny", "allow block", "allow forbid",
    "permit forbid", "approve reject", "approve deny", "include exclude", "insert delete",
    "create delete", "create destroy", "build destroy", "attach detach", "connect disconnect",
    "link unlink", "subscribe unsubscribe", "follow unfollow", "like dislike", "agree disagree",
    "appear disappear", "arrive depart", "arrive leave", "win lose", "won lost", "wins loses",
    "winning losing", "gain lose", "save spend", "borrow lend", "rise fall", "raise lower",
    "expand collapse", "expand shrink", "grow shrink", "inhale exhale", "freeze thaw",
    "freeze melt", "boil freeze", "heat cool",
    "warm cool", "maximize minimize", "show hide", "hide reveal", "hide unhide", "pack unpack",
    "wrap unwrap", "mute unmute", "block unblock", "ban unban", "pin unpin",
    "archive unarchive", "merge split", "join leave", "join split", "enter exit", "enter leave",
    "enqueue dequeue", "activate deactivate", "register unregister",
    "register deregister", "login logout", "signin signout", "check uncheck", "select deselect",
    "select unselect", "remember forget", "love hate", "praise criticize", "attack defend",
    "inflate deflate", "ascend descend", "increment decrement", "upgrade downgrade",
    "upvote downvote", "overestimate underestimate", "charge discharge", "plug unplug",
    "tie untie", "fold unfold", "dress undress", "do undo", "redo undo", "assemble disassemble",
    "serialize deserialize", "marshal unmarshal", "read write", "teach learn", "ask answer",
    "hire fire", "sink float", "wake sleep", "live die", "marry divorce", "punish reward",
    "pass fail", "succeed fail", "enlarge shrink", "lengthen shorten",
    "widen narrow", "strengthen weaken", "tighten loosen", "speed slow",
    "accelerate decelerate", "overwrite append", "encourage discourage", "trust distrust",
    "obey disobey", "continue stop", "continue quit", "pause resume", "pause play",
    "zoom unzoom", "sync unsync", "bold unbold", "freeze unfreeze", "hibernate wake",
    "publish unpublish", "share unshare", "verify unverify",
    "emigrate immigrate", "import export", "inbound outbound", "incoming outgoing",
    "inflow outflow", "input output", "upstream downstream", "uphill downhill",
    "upstairs downstairs", "upside downside", "uptrend downtrend", "upward downward",
    "inward outward", "indoor outdoor", "indoors outdoors", "inside outside",
    "indoors outside", "indoor outside", "outdoors inside", "outdoor inside",
    "interior exterior", "internal external", "inner outer", "include omit", "overpay underpay",
    "overcook undercook", "overweight underweight", "overrated underrated",
    "overestimate underestimate", "overexposed underexposed", "overclock underclock",
    "attract repel", "attract rid", "attract remove", "attract kill", "attract deter",
    "win host", "won hosted", "winner host", "inner left", "inner right", "keep discard",
    "keep throw", "built fell", "built fall", "build demolish",
    "built demolished", "rebase merge", "receive give", "received gave", "receiving giving",
    "install upgrade", "keep wipe", "keep lose", "keep losing", "keep delete", "keep deleting",
    "read update", "read edit", "restart rebuild",
    "drink eat", "size weight", "deficiency excess", "deficiency toxicity", "deficiency overdose",
    "direct compose produce", "director composer producer", "plant harvest", "sow harvest",
    "runny set", "runny firm", "runny hard", "during after", "ask decline", "stay change",
    "original cover", "deadline open", "deadline start",
    /* a word and a compound it begins, another food */
    "grape grapefruit", "nut nutmeg", "egg eggplant",
    /* drugs, salts and conditions a letter apart, which a slip would pass */
    "abduction adduction", "abductor adductor", "sulfate sulfite", "nitrate nitrite",
    "chlorate chlorite", "dysphagia dysphasia", "aphasia aphagia", "perineal peroneal",
    "prednisone prednisolone", "hydroxyzine hydralazine", "sprain strain",
    /* units a letter apart */
    "bit byte", "kilobit kilobyte", "megabit megabyte", "gigabit gigabyte",
    "terabit terabyte",
    /* quantifiers */
    "all most some", "all any", "any most", "all only", "every any", "every some",
    "both either", "little lot", "substr substring",
    /* tasks on a text */
    "shorten long", "shorten expand", "summarize expand", "condense expand",
    /* what led to a thing and what followed it */
    "cause consequence", "cause effect", "cause aftermath", "led consequence", "led effect",
    "area population currency gdp", "capital population",
    /* one measure of a thing and another */
    "recommended maximum", "cheapest fastest", "cheapest quickest", "cheapest shortest",
    "average worst", "average best", "amortized worst", "area circumference",
    "perpendicular parallel", "melting boiling", "melting freezing", "number mass",
    "mole molecule", "moles molecules", "plot theme", "plot themes", "null undefined",
    "keep drop", "squash revert", "append prepend", "append insert", "key value",
    "formal casual", "formal friendly", "international domestic", "checked carry",
    /* what two things share, and what sets them apart */
    "difference common", "difference similar", "difference similarity", "difference alike",
    "difference related", "differ resemble", "different similar", "different alike",
    "distinguish similar",
    /* a time counted from, and one counted to */
    "since until", "since till",
    /* adjectives and adverbs */
    "large small", "big small", "big little", "huge tiny", "tall short", "long short",
    "high low", "higher lower", "upper lower", "uppercase lowercase", "wide narrow",
    "thick thin", "fat thin", "fat lean", "heavy light", "deep shallow", "hot cold",
    "warm cold", "warm cool", "hard soft", "hard easy", "difficult easy", "strong weak",
    "fast slow", "quick slow", "early late", "old new", "old young", "new used", "rich poor",
    "cheap expensive", "good bad", "better worse", "best worst", "good evil", "right wrong",
    "correct incorrect", "true false", "valid invalid", "legal illegal", "possible impossible",
    "safe dangerous", "safe unsafe", "healthy unhealthy", "clean dirty", "wet dry",
    "full empty", "light dark", "bright dark", "bright dim", "loud quiet", "noisy quiet",
    "happy sad", "positive negative", "active inactive", "active passive", "public private",
    "maximum minimum", "max min", "most least", "more less", "more fewer", "many few",
    "much little", "plus minus", "before after", "above below", "over under", "front back",
    "forward backward", "forwards backwards", "ahead behind", "top bottom", "first last",
    "beginning end", "left right", "up down", "in out", "on off", "open closed",
    "ascending descending", "increasing decreasing", "sync async", "synchronous asynchronous",
    "static dynamic", "mutable immutable", "global local", "frontend backend",
    "absolute relative", "explicit implicit", "manual automatic", "visible invisible",
    "visible hidden", "online offline", "remote local", "horizontal vertical", "odd even",
    "prime composite", "rational irrational", "finite infinite", "same different",
    "equal unequal", "complete incomplete", "present absent", "past future", "past present",
    "ancient modern", "raw cooked", "sweet sour", "sweet bitter", "sweet salty", "alive dead",
    "native foreign", "domestic foreign", "domestic wild", "urban rural", "acidic alkaline",
    "acid base", "ripe unripe", "fresh frozen", "fresh stale", "fresh rotten", "rough smooth",
    "sharp blunt", "sharp dull", "tight loose", "straight curved", "straight crooked",
    "simple complex", "simple compound", "major minor", "senior junior", "majority minority",
    "permanent temporary", "formal informal", "literal figurative", "concrete abstract",
    "objective subjective", "qualitative quantitative", "optimistic pessimistic",
    "introvert extrovert", "introverted extroverted", "bullish bearish", "offensive defensive",
    "attack defense", "ugly beautiful", "ugly pretty", "polite rude", "kind cruel",
    "brave cowardly", "generous stingy", "honest dishonest", "lucky unlucky",
    "fertile infertile", "wealthy poor", "busy idle", "busy free", "free paid", "free busy",
    "asleep awake", "awake asleep", "run stop", "dense sparse", "vertical horizontal",
    "male female",
    "masculine feminine", "transparent opaque", "conscious unconscious",
    "voluntary involuntary", "cheapest priciest", "cheaper pricier", "often rarely",
    "always never", "sometimes always", "everything nothing", "everyone nobody", "all none",
    "success failure", "safer riskier", "acute chronic", "benign malignant",
    "systolic diastolic", "aerobic anaerobic", "organic inorganic", "renewable nonrenewable",
    "even uneven", "lossy lossless", "stateful stateless", "blocking nonblocking",
    "sequential parallel", "serial parallel", "shallow deep", "inclusive exclusive",
    "intrinsic extrinsic", "inductive deductive", "micro macro",
    "microeconomics macroeconomics", "maximal minimal", "overflow underflow",
    "hypertension hypotension", "hyperthyroidism hypothyroidism", "hyperglycemia hypoglycemia",
    
    /* nouns: roles and opposites */
    "man woman", "men women", "boy girl", "husband wife", "father mother", "dad mom",
    "son daughter", "brother sister", "uncle aunt", "nephew niece", "king queen",
    "prince princess", "grandfather grandmother", "male female", "buyer seller",
    "teacher student", "employer employee", "landlord tenant", "parent child",
    "ancestor descendant", "predecessor successor", "prefix suffix", "header footer",
    "numerator denominator", "floor ceiling", "cause effect", "problem solution",
    "victory defeat", "war peace", "friend enemy", "ally enemy", "truth lie",
    "fact fiction", "fact opinion", "fiction nonfiction", "theory practice", "pro con",
    "advantage disadvantage", "benefit drawback", "strength weakness", "asset liability",
    "profit loss", "income expense", "credit debit", "supply demand", "inflation deflation",
    "offense defense", "source destination", "sender receiver", "request response",
    "client server", "import export", "day night", "morning evening", "morning night",
    "sunrise sunset", "dawn dusk", "birth death", "start end", "entry exit", "entrance exit",
    "arrival departure", "heaven hell", "life death", "beginner expert", "beginner advanced",
    "amateur professional", "winner loser", "leader follower",
    "producer consumer", "predator prey", "host guest", "input output", "maximum minimum",
    "upside downside", "surplus deficit", "export import", "minimum maximum", "adult child",
    "adult kid", "plaintiff defendant", "prosecution defense", "north south", "east west",
    "odd even", "positive negative", "cathode anode", "proton electron", "electron neutron",
    "proton neutron", "numerator denominator", "horizontal vertical", "acid base",
    "heads tails", "pros cons", "hardware software", "vowel consonant", "noun verb",
    "noun adjective", "verb adjective", "adjective adverb", "singular plural", "active passive",
    "synonym antonym", "inhalation exhalation", "mitosis meiosis", "dominant recessive",
    "genotype phenotype", "prokaryotic eukaryotic", "vertebrate invertebrate",
    "herbivore carnivore", "herbivore omnivore", "carnivore omnivore", "artery vein",
    "endothermic exothermic", "endotherm ectotherm", "mean median", "median mode", "mean mode",
    "permutation combination", "sine cosine", "cosine tangent", "sine tangent",
    "derivative integral", "differentiation integration", "stack queue", "space time",
    "tcp udp", "ipv4 ipv6", "http https", "rows columns",
    "row column", "line column", "lines columns", "width height", "length width",
    "latitude longitude", "radius diameter",
    "area perimeter", "area volume", "weather climate",
    "virus bacteria", "bacterial viral", "vaccine antibiotic", "frontend backend",
    "compile interpret", "compiler interpreter", "compiled interpreted",
    "union intersection", "inner outer", 
    /* closed classes: any two members differ */
    "symptom cause treatment prevention diagnosis complication",
    "yesterday today tomorrow tonight", "now later", 
    "monday tuesday wednesday thursday friday saturday sunday weekday weekend",
    "january february march april june july august september october november december",
    "spring summer autumn fall winter",
    "hourly daily weekly biweekly monthly quarterly yearly annual",
    "red orange yellow green blue purple violet pink brown black white gray grey silver gold",
    "breakfast lunch dinner brunch supper",
    "mercury venus earth mars jupiter saturn uranus neptune pluto moon sun",
    "africa asia europe antarctica australia oceania america",
    "english spanish french german italian portuguese chinese mandarin cantonese japanese "
    "korean russian arabic hindi bengali urdu dutch greek latin hebrew turkish polish "
    "swedish norwegian danish finnish vietnamese thai indonesian persian swahili",
    "python java javascript typescript ruby rust php perl kotlin scala haskell c++ c# f# "
    "swift golang lua julia matlab fortran cobol erlang elixir clojure dart lisp ocaml "
    "zig r", "html css sql",
    "windows linux macos ubuntu debian fedora android ios chromeos freebsd",
    "chrome firefox safari",
    "mysql postgres postgresql sqlite mongodb redis mariadb cassandra oracle", "aws azure gcp",
    "react angular vue svelte jquery", "django flask fastapi rails laravel",
    "pip conda npm yarn apt brew", "bash zsh powershell", "vim emacs nano vscode",
    "git svn mercurial", "celsius fahrenheit kelvin °c °f",
    "millimeter centimeter meter kilometer inch foot yard mile mm cm km",
    "milligram gram kilogram pound ounce ton tonne mg kg lb oz",
    "milliliter liter gallon quart pint cup tablespoon teaspoon ml ounce oz",
    "millisecond microsecond nanosecond minute hour day week month year decade century",
    "dollar euro pound yen yuan rupee peso franc ruble bitcoin",
    "north south east west northeast northwest southeast southwest",
    "circle square triangle rectangle pentagon hexagon heptagon octagon nonagon decagon "
    "cube sphere cylinder cone pyramid", "solid liquid gas plasma",
    "addition subtraction multiplication division",
    "add subtract multiply divide", 
    "mammal reptile amphibian bird fish insect", "sedan suv truck van",
    "car bicycle motorcycle scooter", "car bike",
    "hurricane tornado earthquake tsunami flood", "hydrogen helium oxygen nitrogen carbon",
    "alpha beta gamma delta", "gold silver bronze", "vegan vegetarian",
    "hardware software firmware", "bachelor master doctorate",
    "basketball volleyball football soccer baseball hockey tennis golf rugby cricket "
    "softball badminton handball", "proofread translate summarize",
    "essay list poem story haiku limerick summary outline table tweet",
     "freshman sophomore junior senior",
    "infant toddler teenager adult", "adult kitten", "adult puppy", "cat kitten", "dog puppy",
    /* what one reads, watches or hears */
    "book movie", "book film", "book show", "book podcast", "read watch", "read listen",
    /* a tone asked of a text */
    "polite firm", "polite stern", "polite angry",
    /* containers of a language; what Docker keeps */
    "dict list", "dict tuple", "list tuple", "container image volume",
    /* jobs: an engineer and a developer may be one */
    "analyst scientist manager designer engineer", "analyst scientist manager designer developer",
    "entry senior", "new established", "final semifinal quarterfinal", "jammy hard",
    /* where a thing thaws or keeps */
    "fridge counter microwave freezer pantry", "refrigerator counter microwave freezer pantry",
    /* steps of a task that are not one another */
    "create extract", "compress extract", "read save", "load save", "create activate",
    "filter fill", "leave delete", "plant store", "plant dig",
    /* drugs (a brand and its generic are one: the synonyms) */
    "metformin metoprolol lisinopril atorvastatin amlodipine omeprazole ibuprofen "
    "acetaminophen aspirin naproxen amoxicillin prednisone sertraline fluoxetine gabapentin "
    "levothyroxine losartan simvastatin warfarin insulin",
    "paracetamol metformin metoprolol lisinopril atorvastatin amlodipine omeprazole ibuprofen "
    "aspirin naproxen amoxicillin prednisone sertraline fluoxetine gabapentin levothyroxine "
    "losartan simvastatin warfarin insulin",
    /* pets */
    "cat dog rabbit hamster ferret horse parrot",
    /* kinds of a thing that are not one another */
    "unit integration", "trademark copyright patent", "arborio basmati jasmine",
    "angularjs angular", "multiple divisor", "lcm gcd", "clone create", "clone init",
    "keep rid", "install rid", "add rid", "result cause", "most latest", "old modern",
    "rotate balance align", "together apart", "current future", "const var", "road mountain",
    "combine split", "combine separate", "win nominate", "summary full",
    "protect unprotect", "protect remove", "chronological release", "built demolish",
    "strength hypertrophy endurance",
    "cross inner", "cross outer", "multiple factor", "lcm gcf", "hardwood laminate tile carpet",
    "cache history cookie", "executor beneficiary witness",
    /* what a diet counts */
    "protein carb carbohydrate fiber sugar sodium creatine caffeine cholesterol calorie",
    /* how many of a kind */
    "exactly least",
    COUNTRIES,
};
/* clang-format on */

/* clang-format off */
static const char *const synonym_groups[] = {
    "big large huge giant enormous massive", "small little tiny miniature",
    "biggest largest", "smallest tiniest", "fast quick rapid speedy swift",
    "quickly rapidly fast", "begin start commence",
    "end finish conclude terminate", "finish complete", "stop halt quit end",
    "make create build construct produce generate", "buy purchase get", "get obtain acquire",
    "fix repair mend resolve solve", "error mistake bug issue problem",
    "car automobile vehicle", "empty blank", "movie film", "picture photo image photograph",
    "help assist aid",
    "use utilize employ", "write compose author draft", "book novel",
    "show display demonstrate", "tell explain describe", "define meaning mean definition",
    "explain clarify", "delete remove erase", "uninstall remove", "cancel abort",
    "choose select pick",
    "speak talk say", "look see watch view", "job work employment occupation career",
    "shop store", "kid child", "doctor physician", "sick ill unwell", "happy glad joyful",
    "sad unhappy", "smart intelligent clever", "dangerous unsafe hazardous risky",
    "safe secure harmless", "cheap inexpensive affordable", "expensive costly pricey",
    "easy simple", "hard difficult tough challenging", "right correct",
    "wrong incorrect mistaken", "near close nearby", "shut close", "high tall", "rich wealthy",
    "fridge refrigerator", "tv television", "phone telephone cellphone " "smartphone mobile",
    "internet web online", "website site", "email mail", "app application program software",
    "folder directory", "hi hello hey", "people persons person folks", "world earth planet globe",
    "sea ocean", "autumn fall", "sofa couch", "trash garbage rubbish", "pants trousers",
    "vacation holiday", "elevator lift", "apartment flat", "truck lorry", "soccer football",
    "gas petrol gasoline", "attorney lawyer", "baby infant", "infinite endless",
    "maybe perhaps", "often frequently", "sometimes occasionally", "rarely seldom",
    "almost nearly", "enough sufficient", "answer reply response", "question query",
    "start launch", "increase raise boost improve enhance grow", "reduce decrease lower "
    "lessen cut", "check verify confirm", "cost price", "fee charge", "purpose goal aim "
    "objective", "method way approach technique", "reason cause", "kill murder", "color colour",
    "favorite favourite", "center centre", "organize organise", "analyze analyse", "gray grey",
    "defense defence", "license licence", "program programme", "theater theatre", "meter metre",
    "liter litre", "kilometer kilometre km", "centimeter centimetre cm",
    "millimeter millimetre mm", "kilogram kg kilo", "gram g", "pound lb lbs", "ounce oz", "celsius °c", "fahrenheit °f",
    "foot feet ft", "inch inches", "mile miles mi", "liter l", "milliliter ml",
    "mother mom mum mommy", "father dad daddy", "bicycle bike", "mount mt", "doctor dr",
    "barbecue bbq", "usa us america american", "dollar usd", "euro eur", "pound gbp", "yen jpy",
    "rupee inr", "uk britain british", "tire tyre", "mold mould",
    "aluminum aluminium", "jewelry jewellery", "pajamas pyjamas", "catalog catalogue",
    "curb kerb", "donut doughnut", "plow plough", "javascript js", "typescript ts", "golang go",
    "integer int", "string str", "boolean bool", "dictionary dict", "character char",
    "python py", "dataframe df", "year yr", "acetaminophen paracetamol tylenol",
    "ibuprofen advil motrin", "repository repo", "pc computer",
    /* a country and its people's adjective */
    "switzerland swiss", "france french", "germany german", "japan japanese", "china chinese",
    "italy italian", "spain spanish", "mexico mexican", "canada canadian", "india indian",
    "russia russian", "brazil brazilian", "sweden swedish", "norway norwegian",
    "ireland irish", "netherlands dutch", "greece greek", "turkey turkish", "korea korean",
    "egypt egyptian", "australia australian", "iceland icelandic", "portugal portuguese",
    "poland polish", "thailand thai", "vietnam vietnamese", "denmark danish",
    "finland finnish", "austria austrian", "belgium belgian", "argentina argentinian",
    "postgres postgresql", "kubernetes k8s", "nodejs node.js",
    "tall high", "height tall", "height high",
    "length long",
    "weight heavy", "age old", "width wide", "depth deep", "distance far",
    "price cost expensive", "speed fast", "temperature hot", "wash clean", "brew make",
    "cook make prepare", "recipe instructions", "sleep rest", "eat consume", "drink consume",
    "learn study", "teach educate", "understand comprehend", "think believe",
    "want wish desire", "need require", "allow permit let", "forbid prohibit ban",
    "stop prevent", "keep retain", "send transmit", "connect link", "join connect",
    "copy duplicate", "move transfer", "rename name", "change modify alter edit update",
    "update upgrade", "install setup", "run execute", "launch open", "close exit quit",
    "kill terminate", "list enumerate show", "find search locate", "compare contrast",
    "combine merge join", "split divide separate", "convert turn transform change",
    "calculate compute", "count number", "verify validate", "benefit advantage",
    "drawback disadvantage downside", "risk danger hazard", "sign symptom",
    "illness disease sickness", "medicine medication drug", "job position role",
    "salary pay wage", "money cash", "house home", "room chamber", "road street", "city town",
    "country nation", "shirt top", "dress gown", "fast speedy",
    "slow sluggish", "strong powerful", "weak feeble", "calm relaxed", "angry mad",
    "scared afraid frightened", "tired exhausted sleepy", "clever smart", "stupid dumb",
    "funny humorous", "strange weird odd", "beautiful pretty lovely", "ugly unattractive",
    "neat tidy", "dirty filthy", "famous wellknown", "huge vast immense", "quiet silent",
    "noisy loud", "wet damp moist", "important significant crucial", "main primary principal",
    "common frequent usual", "unusual uncommon rare", "whole entire", "total sum",
    "part portion piece", "daily day", "weekly week", "monthly month", "yearly annual year",
    "hourly hour", "sci-fi scifi", "recent last latest", "previous prior last",
    "is are am", "was were", "intake consumption", "good great fine nice",
    "best top finest greatest",
    "bad poor", "unhealthy bad", 
};
/* clang-format on */

/* Irregular verbs, as base, -s, -ing, past and past participle ("-" for a form left out):
 * "taught" is a form of "teach" as "painted" is of "paint". Verbs whose past reads as a
 * common noun or adjective of its own (left, ground, wound, bit, rose, light) are not
 * listed, nor are those spelled the same in every form (put, read). */
/* clang-format off */
static const char *const irregular_verbs[] = {
    "become becomes becoming became become", "begin begins beginning began begun",
    "blow blows blowing blew blown", "break breaks breaking broke broken",
    "bring brings bringing brought brought", "build builds building built built",
    "buy buys buying bought bought", "catch catches catching caught caught",
    "choose chooses choosing chose chosen", "come comes coming came come",
    "deal deals dealing dealt dealt", "dig digs digging dug dug",
    "draw draws drawing drew drawn", "drink drinks drinking drank drunk",
    "drive drives driving drove driven", "eat eats eating ate eaten",
    "fall falls falling fell fallen", "feel feels feeling felt felt",
    "fight fights fighting fought fought", "find finds finding found found",
    "fly flies flying flew flown", "forbid forbids forbidding forbade forbidden",
    "forget forgets forgetting forgot forgotten", "forgive forgives forgiving forgave forgiven",
    "freeze freezes freezing froze frozen", "give gives giving gave given",
    "go goes going went gone", "grow grows growing grew grown", "hang hangs hanging hung hung",
    "hear hears hearing heard heard", "hide hides hiding hid hidden",
    "hold holds holding held held", "keep keeps keeping kept kept",
    "know knows knowing knew known", "lend lends lending lent lent",
    "lose loses losing lost lost", "make makes making made made",
    "mean means meaning meant meant", "meet meets meeting met met", "pay pays paying paid paid",
    "ride rides riding rode ridden", "ring rings ringing rang rung",
    "rise rises rising - risen", "run runs running ran run", "say says saying said said",
    "see sees seeing saw seen", "seek seeks seeking sought sought",
    "sell sells selling sold sold", "send sends sending sent sent",
    "shake shakes shaking shook shaken", "shine shines shining shone shone",
    "shoot shoots shooting shot shot", "shrink shrinks shrinking shrank shrunk",
    "sing sings singing sang sung", "sink sinks sinking sank sunk",
    "sleep sleeps sleeping slept slept", "speak speaks speaking spoke spoken",
    "spend spends spending spent spent", "stand stands standing stood stood",
    "steal steals stealing stole stolen", "swim swims swimming swam swum",
    "take takes taking took taken", "teach teaches teaching taught taught",
    "tell tells telling told told", "think thinks thinking thought thought",
    "throw throws throwing threw thrown",
    "understand understands understanding understood understood",
    "wear wears wearing wore worn", "win wins winning won won",
    "withdraw withdraws withdrawing withdrew withdrawn", "write writes writing wrote written",
};
/* clang-format on */

/* Words that carry no subject of their own: question words, auxiliaries, pronouns,
 * prepositions, request phrasing. A swap of one of these for another never vetoes. */
static const char stop_words[] =
    "a an the this that these those my your his her its our their me you i we they he she "
    "it him them us mine yours ours theirs myself yourself ourselves themselves one ones "
    "is are was were be been being am do does did done doing have has had having can could "
    "will would shall should may might must ought what which who whom whose when where why "
    "how of in on at by for with about as into to from than then so and or but if there "
    "here some any all each every just also too very really please thanks thank hi hello "
    "hey ok okay kindly tell explain describe give know want need way ways something "
    "anything thing things let lets using use via exactly actually simply basically mean "
    "means like such else other another way anyway whether while during through across "
    "onto upon within along among between per toward towards around off up down out over "
    "after before since until till once "
    "under again still ever even only own same etc e.g i.e vs versus able get got getting "
    "make makes made making go goes going went take takes took put puts say says said "
    "tells give gives gave show shows showed provide example examples instance possible "
    "best good right correct proper properly recommended recommend suggest suggestions "
    "steps step guide tutorial command commands help idea ideas tips list u ur thx pls plz "
    "approx approximately roughly explanation";

/* Dropped from the swap rule's word sequence: articles and determiners only say which
 * one, not what. */
static const char drop_words[] = "a an the my your his her its our their some any this that "
                                 "these those please kindly just exactly actually basically "
                                 "really simply";

/* Negators, with a few verbs that negate what follows them ("unable to", "avoid"). */
static const char neg_words[] = "not never no without none nobody nothing nowhere neither nor "
                                "cannot unable avoid prevent lack fail refuse excluding except "
                                "besides";

/* Adverbs that all but negate ("I barely sweat"): negators that are words of their own. */
static const char near_neg_words[] = "hardly barely scarcely rarely seldom";

/* Directional words: "x to y" read backwards is another question. */
static const char dir_words[] = "to into from than per onto towards toward";

static const char wh_words[] = "who when where why how";

/* Verbs that keep something "from doing" it (a negation of the doing), and verbs that say
 * to stop doing it: "stop my dog from barking" is "get my dog to quit barking". */
static const char keep_from_words[] = "keep stop protect";
static const char cease_words[] = "quit stop cease keep prevent avoid";

/* Prepositions that open a phrase narrowing the question whatever follows ("snacks for
 * kids", "a diet with diabetes", "pain after surgery"), and those that more often name the
 * setting the question already implies ("brake fluid in my car", "a foreign key in a
 * database"): these narrow it only with a qualifier or a group of people ("symptoms in
 * children"). */
static const char strong_preps[] = "for with during after before under over per";
static const char weak_preps[] = "in on of at by near inside outside within from as";

/* Words that narrow the noun they stand before or the phrase they are in: diets and
 * preparations, stages and severities, sizes and scopes, conditions. A noun that names a
 * category ("the movie Inception", "a network switch", "the chemical formula") does not. */
static const char qualifiers[] =
    "vegan vegetarian gluten dairy lactose sugar keto paleo organic raw homemade frozen iced "
    "decaf spicy low high free fat fried grilled baked boiled instant whole "
    "early late chronic acute severe mild advanced basic beginner intermediate first final "
    "long short term temporary permanent rare hereditary "
    "small large tiny big mini portable wireless electric manual automatic used "
    "broken cheap budget luxury professional commercial private public international "
    "domestic online offline local remote single multiple all every each only just entire "
    "partial dark next former future previous last nautical square cubic metric imperial "
    "fluid troy ascending descending alphabetical chronological reverse reversed worst "
    "average indoor outdoor bulk scratch advance hand";

/* Words that join two things without ordering them. */
static const char join_words[] = "and or vs versus nor";

/* Times of day or year that set a question apart when added: "why is the sky blue at
 * night", "tires in winter" (not a unit: "how much water in a day"). */
static const char time_settings[] = "night nights nighttime morning mornings evening evenings "
                                    "afternoon winter summer spring autumn weekend weekends";
/* Nouns a programming keyword names: "a for loop" vs "a while loop". */
static const char keyword_nouns[] = "loop statement clause keyword block";

/* Nouns that name the class of the word before them, adding nothing to it: "the fall
 * season", "the vim editor", "my Gmail account", "the new features". */
static const char class_nouns[] = "season editor app application tool language software "
                                  "platform service program account website site device "
                                  "feature game series company brand";

/* Words a question adds to sound natural, narrowing nothing: "a new branch", "more
 * healthy", "a simple example". */
static const char filler_adjectives[] = "new more most very nice simple easy quick exact";

/* Qualifiers that end a question after what they qualify ("open an account online"). */
static const char trailing_qualifiers[] = "online offline indoors outdoors overnight";

/* Places and appliances a task is done in, which narrow it as a time does: "cook salmon in
 * the oven", "remove a tattoo at home". */
static const char place_settings[] = "home oven microwave grill stovetop stove cooker fryer "
                                     "airfryer smoker pan skillet wok griddle";

/* What an answer is measured in or laid out as: "in one sentence", "in three bullet points",
 * "as a table", "in all caps". */
static const char format_nouns[] = "sentence sentences paragraph paragraphs word words bullet "
                                   "bullets line lines table tables markdown caps";

/* Words that open a clause narrowing the question: "how much did it cost when it
 * launched", "can I take it if I am pregnant". */
static const char subordinators[] = "when if while unless whenever once until";

/* One thing, or all of them. */
static const char scope_one[] = "one single individual particular specific";
static const char scope_all[] = "all every entire whole each";

/* Groups of people or animals a question may be narrowed to. */
static const char audiences[] =
    "child children kid kids toddler toddlers baby babies infant infants teen teens "
    "teenager teenagers adult adults senior seniors elderly women woman men man girl girls "
    "boy boys student students beginner beginners expert experts diabetic diabetics "
    "pregnancy pregnant athlete athletes dog dogs cat cats puppy puppies kitten kittens "
    "smoker smokers vegetarians vegans employee employees patient patients";

/* Auxiliaries by tense: "who is" and "who was" the president are two questions. */
static const char past_aux[] = "was were did had";
static const char now_aux[] = "is are am do does has have will shall can";

/* What follows "how" when it asks for an amount or a time ("how long ago"). */
static const char how_quantity[] = "long old many much soon often far";
/* What follows "how" when it asks for a measure of a thing ("how wide is the river"). */
static const char how_measure[] = "wide broad tall high deep thick thin big large small tiny "
                                  "heavy fast quick hot cold warm loud bright strong short";

/* Time words read against now: "this year" (or "the year") is not "last year" nor "next
 * year". 0: now, 1: before, 2: after. */
static const char *const time_deixis[] = {"this current present", "last previous past",
                                          "next upcoming coming"};
static const char time_nouns[] = "year month week day weekend season night morning evening "
                                 "summer winter spring autumn fall election game match "
                                 "quarter semester term decade century";

/* Common nouns that complete a name the other side says without them: "the Nile" and "the
 * Nile River", "Everest" and "Mount Everest". */
static const char place_nouns[] = "river lake mount mountain mountains ocean sea island "
                                  "islands city state county bay desert canyon valley falls "
                                  "peninsula strait gulf street avenue park university "
                                  "college airport station bridge tower castle palace";

/* What is done to a number, each group one operation in its spellings: a side that adds,
 * drops or changes one asks for another result ("the square root of 16" vs "the square of
 * 16", "the natural log of 10" vs "the log of 10"). */
static const char *const math_ops[] = {
    "root roots sqrt cbrt", "log logs logarithm logarithms", "ln", "natural", "factorial",
    "reciprocal", "inverse", "derivative differentiate", "integral integrate",
    "square squared sqrt", "cube cubed cbrt", "exponential exp", "absolute", "cosine cos",
    "sine sin", "tangent tan", "binary", "hexadecimal hex", "octal",
};

/* What "when" asks for: "what year", "which century", "at what age", "what is the deadline". */
static const char when_units[] = "year date day time century decade month era age deadline";

/* Nouns that frame a question rather than narrow it: "the reason cats purr", "the word
 * ubiquitous". */
static const char frame_nouns[] = "reason purpose meaning definition word term phrase concept "
                                  "process method kind type sort time times people person "
                                  "someone somebody ago form located situated called "
                                  "today nowadays currently question";

/* Units a measure is counted in: "how many feet tall" asks "how tall", "how many square
 * miles" "how big". */
static const char measure_units[] =
    "feet foot meters metres meter metre miles mile kilometers kilometres km inches inch "
    "centimeters centimetres cm millimeters mm yards yard square cubic acres acre hectares "
    "pounds pound lbs kilograms kilos kg grams ounces oz tons tonnes liters litres gallons "
    "degrees stories storeys calories";

/* Adverbs of manner that set a task apart when added, unlike most in -ly ("quickly"): "center
 * a div vertically", "sort a list alphabetically", "download it legally". */
static const char manner_adverbs[] =
    "vertically horizontally diagonally alphabetically numerically chronologically "
    "recursively iteratively asynchronously synchronously concurrently manually "
    "automatically permanently temporarily remotely wirelessly legally illegally "
    "insensitively sensitively securely naturally privately internationally cheaply";

/* Words a reworded question adds around what it asks, narrowing nothing ("I was wondering",
 * "walk me through", "the process for", "start investing", "check which version", "convert
 * 100 F to Celsius"). */
static const char rephrase_words[] =
    "wondering wonder share walk process procedure method start begin check convert calculate "
    "translate shortcut";

/* Words in -ly that are adjectives, not adverbs: "early symptoms" narrows "symptoms",
 * "quickly" in "quickly boil an egg" does not narrow the egg. */
static const char ly_adjectives[] = "early daily weekly monthly yearly hourly nightly elderly "
                                    "friendly costly deadly family only likely lonely lovely "
                                    "ugly silly curly oily holy doubly singly";

/* Number words. kind: 0 unit (0-19, ordinals too), 1 tens, 2 hundred, 3 scale, 4 dozen. */
static const struct {
    const char *w;
    int kind;
    long long v;
} num_words[] = {
    {"zero", 0, 0},
    {"one", 0, 1},
    {"two", 0, 2},
    {"three", 0, 3},
    {"four", 0, 4},
    {"five", 0, 5},
    {"six", 0, 6},
    {"seven", 0, 7},
    {"eight", 0, 8},
    {"nine", 0, 9},
    {"ten", 0, 10},
    {"eleven", 0, 11},
    {"twelve", 0, 12},
    {"thirteen", 0, 13},
    {"fourteen", 0, 14},
    {"fifteen", 0, 15},
    {"sixteen", 0, 16},
    {"seventeen", 0, 17},
    {"eighteen", 0, 18},
    {"nineteen", 0, 19},
    {"twenty", 1, 20},
    {"thirty", 1, 30},
    {"forty", 1, 40},
    {"fifty", 1, 50},
    {"sixty", 1, 60},
    {"seventy", 1, 70},
    {"eighty", 1, 80},
    {"ninety", 1, 90},
    {"hundred", 2, 100},
    {"thousand", 3, 1000},
    {"million", 3, 1000000},
    {"billion", 3, 1000000000LL},
    {"trillion", 3, 1000000000000LL},
    {"dozen", 4, 12},
    {"first", 0, 1},
    {"second", 0, 2},
    {"third", 0, 3},
    {"fourth", 0, 4},
    {"fifth", 0, 5},
    {"sixth", 0, 6},
    {"seventh", 0, 7},
    {"eighth", 0, 8},
    {"ninth", 0, 9},
    {"tenth", 0, 10},
    {"eleventh", 0, 11},
    {"twelfth", 0, 12},
    {"thirteenth", 0, 13},
    {"fourteenth", 0, 14},
    {"fifteenth", 0, 15},
    {"sixteenth", 0, 16},
    {"seventeenth", 0, 17},
    {"eighteenth", 0, 18},
    {"nineteenth", 0, 19},
    {"twentieth", 1, 20},
    {"thirtieth", 1, 30},
    {"fortieth", 1, 40},
    {"fiftieth", 1, 50},
    {"sixtieth", 1, 60},
    {"seventieth", 1, 70},
    {"eightieth", 1, 80},
    {"ninetieth", 1, 90},
    {"hundredth", 2, 100},
    {"thousandth", 3, 1000},
    {"millionth", 3, 1000000},
    {"once", 0, 1},
    {"twice", 0, 2},
    {"thrice", 0, 3},
    {"single", 0, 1},
    {"double", 0, 2},
    {"triple", 0, 3},
    {"quadruple", 0, 4},
    {"half", 0, -2},
    {"quarter", 0, -4},
};

enum {
    K_STOP = 1,
    K_DROP,
    K_NEG,
    K_NEARNEG,
    K_DIR,
    K_WH,
    K_CONTRAST,
    K_SYN,
    K_NUM,
    K_KEEP,
    K_CEASE,
    K_PREP,
    K_WEAKPREP,
    K_QUAL,
    K_AUDIENCE,
    K_ONE,
    K_ALL,
    K_JOIN,
    K_PAST,
    K_NOW,
    K_LYADJ,
    K_MANNER,
    K_REPHRASE,
    K_UNIT,
    K_FRAME,
    K_WHEN,
    K_HOWQTY,
    K_HOWDIM,
    K_SUBORD,
    K_FORMAT,
    K_SETTING,
    K_TRAIL,
    K_KEYNOUN,
    K_CLASS,
    K_FILLER,
    K_DEIXIS,
    K_TIMENOUN,
    K_PLACE,
    K_MATHOP,
    K_VERB /* group: verb * 8 + form (0 base, 1 -s, 2 -ing, 3 past, 4 participle) */
};

typedef struct {
    const char *w;
    uint8_t len;
    uint8_t kind;
    uint16_t group; /* index into the kind's table */
    int16_t next;   /* next entry for the same word, -1 */
} lexent;

#define LEX_MAX 6144
#define LEX_SLOTS 16384 /* power of two, >= 2 * LEX_MAX */

static lexent lex[LEX_MAX];
static int lex_n;
static int16_t lex_slot[LEX_SLOTS]; /* head entry + 1; 0 empty */
static pthread_once_t lex_once = PTHREAD_ONCE_INIT;

static uint32_t hash_bytes(const char *s, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

/* Head entry of word w, or -1. */
static int lex_find(const char *w, size_t n)
{
    if (n == 0 || n > 255) return -1;
    uint32_t h = hash_bytes(w, n) & (LEX_SLOTS - 1);
    for (;;) {
        int e = lex_slot[h] - 1;
        if (e < 0) return -1;
        if (lex[e].len == n && memcmp(lex[e].w, w, n) == 0) return e;
        h = (h + 1) & (LEX_SLOTS - 1);
    }
}

static void lex_add(const char *w, size_t n, int kind, int group)
{
    if (n == 0 || n > 255 || lex_n >= LEX_MAX)
        return; /* the tables above are sized well under LEX_MAX */
    int e = lex_n++;
    lex[e] = (lexent){w, (uint8_t)n, (uint8_t)kind, (uint16_t)group, -1};
    uint32_t h = hash_bytes(w, n) & (LEX_SLOTS - 1);
    for (;;) {
        int x = lex_slot[h] - 1;
        if (x < 0) {
            lex_slot[h] = (int16_t)(e + 1);
            return;
        }
        if (lex[x].len == n && memcmp(lex[x].w, w, n) == 0) {
            while (lex[x].next >= 0)
                x = lex[x].next;
            lex[x].next = (int16_t)e;
            return;
        }
        h = (h + 1) & (LEX_SLOTS - 1);
    }
}

static void lex_add_words(const char *s, int kind, int group)
{
    while (*s) {
        while (*s == ' ')
            s++;
        const char *w = s;
        while (*s && *s != ' ')
            s++;
        if (s > w) lex_add(w, (size_t)(s - w), kind, group);
    }
}

static void lex_build(void)
{
    lex_add_words(stop_words, K_STOP, 0);
    lex_add_words(drop_words, K_DROP, 0);
    lex_add_words(neg_words, K_NEG, 0);
    lex_add_words(near_neg_words, K_NEARNEG, 0);
    lex_add_words(dir_words, K_DIR, 0);
    lex_add_words(wh_words, K_WH, 0);
    lex_add_words(keep_from_words, K_KEEP, 0);
    lex_add_words(cease_words, K_CEASE, 0);
    lex_add_words(strong_preps, K_PREP, 0);
    lex_add_words(weak_preps, K_WEAKPREP, 0);
    lex_add_words(qualifiers, K_QUAL, 0);
    lex_add_words(audiences, K_AUDIENCE, 0);
    lex_add_words(scope_one, K_ONE, 0);
    lex_add_words(scope_all, K_ALL, 0);
    lex_add_words(join_words, K_JOIN, 0);
    lex_add_words(past_aux, K_PAST, 0);
    lex_add_words(now_aux, K_NOW, 0);
    lex_add_words(ly_adjectives, K_LYADJ, 0);
    lex_add_words(manner_adverbs, K_MANNER, 0);
    lex_add_words(rephrase_words, K_REPHRASE, 0);
    lex_add_words(measure_units, K_UNIT, 0);
    lex_add_words(frame_nouns, K_FRAME, 0);
    lex_add_words(when_units, K_WHEN, 0);
    lex_add_words(how_quantity, K_HOWQTY, 0);
    lex_add_words(how_measure, K_HOWDIM, 0);
    lex_add_words(subordinators, K_SUBORD, 0);
    lex_add_words(format_nouns, K_FORMAT, 0);
    lex_add_words(time_settings, K_SETTING, 0);
    lex_add_words(place_settings, K_SETTING, 0);
    lex_add_words(trailing_qualifiers, K_TRAIL, 0);
    lex_add_words(keyword_nouns, K_KEYNOUN, 0);
    lex_add_words(class_nouns, K_CLASS, 0);
    lex_add_words(filler_adjectives, K_FILLER, 0);
    for (size_t i = 0; i < sizeof time_deixis / sizeof *time_deixis; i++)
        lex_add_words(time_deixis[i], K_DEIXIS, (int)i);
    lex_add_words(time_nouns, K_TIMENOUN, 0);
    lex_add_words(place_nouns, K_PLACE, 0);
    for (size_t i = 0; i < sizeof math_ops / sizeof *math_ops; i++)
        lex_add_words(math_ops[i], K_MATHOP, (int)i);
    for (size_t i = 0; i < sizeof contrast_groups / sizeof *contrast_groups; i++)
        lex_add_words(contrast_groups[i], K_CONTRAST, (int)i);
    for (size_t i = 0; i < sizeof synonym_groups / sizeof *synonym_groups; i++)
        lex_add_words(synonym_groups[i], K_SYN, (int)i);
    for (size_t i = 0; i < sizeof num_words / sizeof *num_words; i++)
        lex_add(num_words[i].w, strlen(num_words[i].w), K_NUM, (int)i);
    for (size_t i = 0; i < sizeof irregular_verbs / sizeof *irregular_verbs; i++) {
        const char *s = irregular_verbs[i];
        for (int form = 0; *s; form++) {
            const char *w = s;
            while (*s && *s != ' ')
                s++;
            if (s - w > 1) lex_add(w, (size_t)(s - w), K_VERB, (int)i * 8 + form);
            while (*s == ' ')
                s++;
        }
    }
}

static int lex_has(int e, int kind)
{
    for (; e >= 0; e = lex[e].next)
        if (lex[e].kind == kind) return 1;
    return 0;
}

/* 1 when heads a and b share a group of `kind`. */
static int lex_share(int a, int b, int kind)
{
    for (int x = a; x >= 0; x = lex[x].next) {
        if (lex[x].kind != kind) continue;
        for (int y = b; y >= 0; y = lex[y].next)
            if (lex[y].kind == kind && lex[y].group == lex[x].group) return 1;
    }
    return 0;
}

/* The irregular verb a word is a form of, with the forms it is as bits (1 << form); -1. */
static int lex_verb(int e, unsigned *forms)
{
    int v = -1;
    *forms = 0;
    for (; e >= 0; e = lex[e].next)
        if (lex[e].kind == K_VERB) {
            v = lex[e].group / 8;
            *forms |= 1u << (lex[e].group % 8);
        }
    return v;
}

static int lex_num(int e)
{
    for (; e >= 0; e = lex[e].next)
        if (lex[e].kind == K_NUM) return lex[e].group;
    return -1;
}

/* ---------------------------------------------------------------------------------------
 * Tokens
 * --------------------------------------------------------------------------------------- */

#define MAX_TOK 256
#define BUF_CAP 8192
#define MAX_NUM 32
#define NUM_LEN 24

enum {
    F_STOP = 1 << 0,
    F_DROP = 1 << 1,
    F_NEG = 1 << 2,
    F_DIR = 1 << 3,
    F_WH = 1 << 4,
    F_NUM = 1 << 5,     /* a number word, a numeral or a token with digits */
    F_CAP = 1 << 6,     /* Capitalized, not at a sentence start */
    F_ACRO = 1 << 7,    /* two or more capitals, no lower case: NASA */
    F_MIXED = 1 << 8,   /* capital after a lower-case letter: iPhone, JavaScript */
    F_CODE = 1 << 9,    /* identifier: snake_case, a.b, f(), c++ */
    F_QUOTED = 1 << 10, /* inside quotes or backticks */
    F_INITIAL = 1 << 11,
    F_UPFIRST = 1 << 12, /* first letter is a capital */
    F_ENTITY = 1 << 13,
    F_JOINED = 1 << 14, /* joined to the word before by a hyphen: gluten-free */
};

typedef struct {
    const char *s;   /* lower case, contraction suffix removed */
    const char *n;   /* s without plural -s / -es / -ies */
    const char *lem; /* the lexicon form that s matched, or n */
    uint16_t len, nlen, lemlen;
    uint16_t flags;
    int16_t lex; /* head entry of lem (or of s), -1 */
    int16_t num; /* index into side.nums of this token's number, -1 */
    const char *raw; /* the word as written (NULL for one the reading made up) */
    uint16_t rawlen;
} tok;

typedef struct {
    tok t[MAX_TOK];
    int nt;
    char buf[BUF_CAP];
    size_t used;
    char nums[MAX_NUM][NUM_LEN];
    uint8_t numweak[MAX_NUM]; /* the bare word "one": "a cup" and "one cup" agree */
    int nnum;
    int overflow;
    const char *text; /* as given, textlen bytes */
    size_t textlen;
    size_t data_at;   /* where data after a colon starts ("to lower case: HELLO"), or len */
} side;

static int is_alpha(unsigned char c)
{
    return (c | 0x20) >= 'a' && (c | 0x20) <= 'z';
}
static int is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}
static int is_upper(unsigned char c)
{
    return c >= 'A' && c <= 'Z';
}
static int is_lower(unsigned char c)
{
    return c >= 'a' && c <= 'z';
}
static int is_alnum(unsigned char c)
{
    return is_alpha(c) || is_digit(c);
}
static char lower(unsigned char c)
{
    return (char)(is_upper(c) ? c | 0x20 : c);
}

/* Non-ASCII punctuation that must not glue words together. Returns its byte length (0 if
 * p[i] does not start one) and what it is. */
enum { P_SEP = 1, P_APOS, P_DQ_OPEN, P_DQ_CLOSE, P_SQ_OPEN, P_SQUARE, P_CUBE };
static size_t upunct(const unsigned char *p, size_t i, size_t n, int *kind)
{
    if (p[i] == 0xC2 && i + 1 < n) {
        unsigned char c = p[i + 1];
        if (c == 0xB2 || c == 0xB3) { /* x² and x³, "x^2" and "x^3" (tokenize()) */
            *kind = c == 0xB2 ? P_SQUARE : P_CUBE;
            return 2;
        }
        if (c == 0xA0 || c == 0xA1 || c == 0xBF || c == 0xB7) { /* nbsp ¡ ¿ · */
            *kind = P_SEP;
            return 2;
        }
        if (c == 0xAB || c == 0xBB) { /* « » */
            *kind = c == 0xAB ? P_DQ_OPEN : P_DQ_CLOSE;
            return 2;
        }
        return 0;
    }
    if (p[i] == 0xE2 && i + 2 < n && p[i + 1] == 0x80 && p[i + 2] >= 0x80 && p[i + 2] <= 0xBF) {
        unsigned char c = p[i + 2];
        *kind = c == 0x99   ? P_APOS
                : c == 0x98 ? P_SQ_OPEN
                : c == 0x9C ? P_DQ_OPEN
                : c == 0x9D ? P_DQ_CLOSE
                            : P_SEP; /* ’ ‘ “ ” ; dashes, spaces, … */
        return 3;
    }
    if (p[i] == 0xE3 && i + 2 < n && p[i + 1] == 0x80 && p[i + 2] <= 0x82) { /* 　、。 */
        *kind = P_SEP;
        return 3;
    }
    return 0;
}

static int word_byte(const unsigned char *p, size_t i, size_t n)
{
    unsigned char c = p[i];
    int k;
    if (c < 0x80) return is_alnum(c) || c == '_';
    return upunct(p, i, n, &k) == 0;
}

static char *side_alloc(side *sd, size_t n)
{
    if (sd->used + n > BUF_CAP) {
        sd->overflow = 1;
        return NULL;
    }
    char *r = sd->buf + sd->used;
    sd->used += n;
    return r;
}

/* Length of s once a plural or third-person -s is taken off. */
static size_t plural_stem(const char *s, size_t n, int *ies)
{
    *ies = 0;
    if (n < 4 || s[n - 1] != 's') return n;
    if (n >= 5 && memcmp(s + n - 3, "ies", 3) == 0) {
        *ies = 1; /* cities -> city: caller writes the y */
        return n - 2;
    }
    if (s[n - 2] == 's' || s[n - 2] == 'u' || s[n - 2] == 'i' || s[n - 2] == '\'')
        return n; /* class, virus, analysis */
    if (n >= 5 && s[n - 2] == 'e' &&
        (s[n - 3] == 's' || s[n - 3] == 'x' || s[n - 3] == 'z' ||
         (s[n - 3] == 'h' && (s[n - 4] == 'c' || s[n - 4] == 's'))))
        return n - 2; /* boxes, churches, buses */
    return n - 1;
}

/* Finds the lexicon head for a word, trying its inflections. Sets *lem and *lemlen to the
 * lexicon's spelling when found. */
static int lemma_lookup(const char *s, size_t n, const char **lem, size_t *lemlen)
{
    static const char *const sufs[] = {"ing", "ed", "est", "er", "ly", "es", "s"};
    char tmp[64];
    int e = lex_find(s, n);
    if (e >= 0 && (lex_has(e, K_CONTRAST) || lex_has(e, K_SYN) || lex_has(e, K_NUM))) goto found;
    if (n >= sizeof tmp) return -1;
    for (size_t k = 0; k < sizeof sufs / sizeof *sufs; k++) {
        size_t sl = strlen(sufs[k]);
        if (n < sl + 3 || memcmp(s + n - sl, sufs[k], sl) != 0) continue;
        size_t b = n - sl;
        memcpy(tmp, s, b);
        /* stem as is, with a doubled consonant undone, with an e restored, with i -> y */
        size_t cand_len[4];
        char cand[4][64];
        int nc = 0;
        memcpy(cand[nc], tmp, b), cand_len[nc++] = b;
        if (b >= 4 && tmp[b - 1] == tmp[b - 2] && !strchr("aeiouls", tmp[b - 1]))
            memcpy(cand[nc], tmp, b - 1), cand_len[nc++] = b - 1;
        if (b + 1 < sizeof tmp) memcpy(cand[nc], tmp, b), cand[nc][b] = 'e', cand_len[nc++] = b + 1;
        if (tmp[b - 1] == 'i') memcpy(cand[nc], tmp, b), cand[nc][b - 1] = 'y', cand_len[nc++] = b;
        for (int c = 0; c < nc; c++) {
            int x = lex_find(cand[c], cand_len[c]);
            if (x >= 0 && (lex_has(x, K_CONTRAST) || lex_has(x, K_SYN))) {
                e = x;
                goto found;
            }
        }
    }
    return -1;
found:
    *lem = lex[e].w;
    *lemlen = lex[e].len;
    return e;
}

/* Canonical text of a number for comparing: integers without leading zeros, decimals as
 * written (3.10 and 3.1 are different versions). */
static void add_num(side *sd, const char *txt, size_t n, int weak)
{
    if (sd->nnum >= MAX_NUM || n == 0) return;
    while (n > 1 && txt[0] == '0' && is_digit((unsigned char)txt[1]))
        txt++, n--;
    if (n >= NUM_LEN) n = NUM_LEN - 1;
    memcpy(sd->nums[sd->nnum], txt, n);
    sd->nums[sd->nnum][n] = 0;
    sd->numweak[sd->nnum] = (uint8_t)weak;
    sd->nnum++;
}

static void add_num_value(side *sd, long long v, int weak)
{
    char b[NUM_LEN];
    int k;
    if (v == -2)
        k = snprintf(b, sizeof b, "1/2");
    else if (v == -4)
        k = snprintf(b, sizeof b, "1/4");
    else
        k = snprintf(b, sizeof b, "%lld", v);
    add_num(sd, b, (size_t)k, weak);
}

static int roman_value(const char *s, size_t n)
{
    /* Upper-case I, V, X only, two letters or more: II, IV, XIV. C, D, L, M and single
     * letters are more often initials and acronyms. */
    static const char *const tab[] = {"",    "I",    "II",  "III",  "IV",    "V",   "VI",
                                      "VII", "VIII", "IX",  "X",    "XI",    "XII", "XIII",
                                      "XIV", "XV",   "XVI", "XVII", "XVIII", "XIX", "XX"};
    if (n < 2 || n > 5) return 0;
    for (int v = 2; v <= 20; v++)
        if (strlen(tab[v]) == n && memcmp(tab[v], s, n) == 0) return v;
    return 0;
}

static tok *push_tok(side *sd, const char *s, size_t n, unsigned flags)
{
    if (sd->nt >= MAX_TOK) {
        sd->overflow = 1;
        return NULL;
    }
    tok *t = &sd->t[sd->nt++];
    memset(t, 0, sizeof *t);
    t->s = s;
    t->len = (uint16_t)n;
    t->flags = (uint16_t)flags;
    t->lex = -1;
    t->num = -1;
    return t;
}

/* Fills the lexicon-derived fields of a token. */
static void classify(side *sd, tok *t)
{
    int ies;
    /* irregular plurals read as their singular, as -s plurals are */
    static const char *const irregular[][2] = {
        {"children", "child"}, {"men", "man"},     {"women", "woman"}, {"people", "person"},
        {"feet", "foot"},      {"teeth", "tooth"}, {"mice", "mouse"},  {"geese", "goose"}};
    for (size_t i = 0; i < sizeof irregular / sizeof *irregular; i++)
        if (t->len == strlen(irregular[i][0]) && !memcmp(t->s, irregular[i][0], t->len)) {
            t->s = irregular[i][1];
            t->len = (uint16_t)strlen(irregular[i][1]);
            break;
        }
    size_t nl = plural_stem(t->s, t->len, &ies);
    if (nl != t->len && !ies && lex_find(t->s, t->len) >= 0 && lex_find(t->s, nl) >= 0)
        nl = t->len; /* both are words of their own: https is not a plural of http */
    if (ies) {
        char *b = side_alloc(sd, nl);
        if (!b) return;
        memcpy(b, t->s, nl - 1);
        b[nl - 1] = 'y';
        t->n = b;
    } else {
        t->n = t->s;
    }
    t->nlen = (uint16_t)nl;
    t->lem = t->n;
    t->lemlen = t->nlen;

    int e = lex_find(t->s, t->len);
    if (e < 0 && nl != t->len) e = lex_find(t->n, t->nlen);
    if (e >= 0) {
        for (int x = e; x >= 0; x = lex[x].next) {
            switch (lex[x].kind) {
            case K_STOP:
                t->flags |= F_STOP;
                break;
            case K_DROP:
                t->flags |= F_DROP | F_STOP;
                break;
            case K_NEG:
                t->flags |= F_NEG | F_STOP;
                break;
            case K_NEARNEG:
                t->flags |= F_NEG;
                break;
            case K_DIR:
                t->flags |= F_DIR | F_STOP;
                break;
            case K_WH:
                t->flags |= F_WH | F_STOP;
                break;
            default:
                break;
            }
        }
    }
    const char *lem;
    size_t lemlen;
    int le = lemma_lookup(t->s, t->len, &lem, &lemlen);
    if (le >= 0) {
        t->lem = lem;
        t->lemlen = (uint16_t)lemlen;
        t->lex = (int16_t)le;
    } else if (e >= 0) {
        t->lex = (int16_t)e;
    }
}

static int is_from(const tok *t)
{
    return t->len == 4 && memcmp(t->s, "from", 4) == 0;
}

static int is_word(const tok *t, const char *w);
static int one_of(const tok *t, const char *const *list, size_t n);
#define ONE_OF(t, list) one_of((t), (list), sizeof(list) / sizeof *(list))
static int says_one_of(const side *sd, const char *const *list, size_t n);
#define SAYS_ONE_OF(sd, list) says_one_of((sd), (list), sizeof(list) / sizeof *(list))

/* Splits one raw word into tokens: lower case, contraction handled. */
static void emit_word(side *sd, const unsigned char *p, size_t a, size_t b, unsigned flags)
{
    /* "big O" is the time complexity it names */
    if (b - a == 1 && (p[a] | 0x20) == 'o' && sd->nt > 0 && is_word(&sd->t[sd->nt - 1], "big")) {
        sd->nt--;
        static const char *const says[] = {"time", "complexity"};
        for (int k = 0; k < 2; k++) {
            tok *t = push_tok(sd, says[k], strlen(says[k]), (uint16_t)(flags & F_QUOTED));
            if (t) classify(sd, t);
        }
        return;
    }
    /* a currency before an amount is its unit after it: "$50" and "50 dollars" agree,
     * "$50" and "€50" do not */
    static const struct {
        const char *sym, *unit;
    } money[] = {{"$", "dollar"}, {"\xe2\x82\xac", "euro"}, {"\xc2\xa3", "pound"},
                 {"\xc2\xa5", "yen"},  {"\xe2\x82\xb9", "rupee"}};
    for (size_t m = 0; m < sizeof money / sizeof *money; m++) {
        size_t sl = strlen(money[m].sym);
        if (b - a > sl && !memcmp(p + a, money[m].sym, sl) && is_digit(p[a + sl])) {
            emit_word(sd, p, a + sl, b, flags);
            tok *t = push_tok(sd, money[m].unit, strlen(money[m].unit),
                              (uint16_t)(flags & F_QUOTED));
            if (t) classify(sd, t);
            return;
        }
    }
    /* a temperature: "400F", "350°F", "-40°C" are the number and its scale ("180c", "1c"
     * and "5f" may be other things: two digits or a degree sign) */
    if (b - a >= 2 && ((p[b - 1] | 0x20) == 'f' || (p[b - 1] | 0x20) == 'c')) {
        size_t e = b - 1, deg = e >= a + 2 && p[e - 2] == 0xc2 && p[e - 1] == 0xb0;
        if (deg) e -= 2;
        size_t d = a + (p[a] == '-'), digits = 0;
        while (d < e && (is_digit(p[d]) || (p[d] == '.' && d > a)))
            digits += is_digit(p[d++]);
        if (d == e && digits && (deg || digits >= 2)) {
            emit_word(sd, p, a, e, flags);
            const char *scale = (p[b - 1] | 0x20) == 'f' ? "fahrenheit" : "celsius";
            tok *t = push_tok(sd, scale, strlen(scale), (uint16_t)(flags & F_QUOTED));
            if (t) classify(sd, t);
            return;
        }
    }
    size_t n = b - a;
    /* "e.g." and "i.e." say nothing of the question */
    if (n == 3 && p[a + 1] == '.' &&
        (strncasecmp((const char *)p + a, "e.g", 3) == 0 ||
         strncasecmp((const char *)p + a, "i.e", 3) == 0))
        return;
    char *o = side_alloc(sd, n);
    if (!o) return;
    size_t k = 0, apos = (size_t)-1;
    int nup = 0, nlow = 0, ndig = 0, upfirst = -1, mixed = 0, code = 0;
    for (size_t i = a; i < b;) {
        int kind;
        size_t pl = p[i] >= 0x80 ? upunct(p, i, b, &kind) : 0;
        if (p[i] == '-' && i > a) {
            i++; /* a glued prefix's hyphen */
            continue;
        }
        if (p[i] == '\'' || (pl && kind == P_APOS)) {
            apos = k;
            i += p[i] == '\'' ? 1 : pl;
            continue;
        }
        unsigned char c = p[i];
        if (is_upper(c)) {
            nup++;
            if (upfirst < 0) upfirst = 1;
            if (nlow > 0) mixed = 1;
        } else if (is_lower(c)) {
            nlow++;
            if (upfirst < 0) upfirst = 0;
        } else if (is_digit(c)) {
            ndig++;
        } else if (c == '_' || c == '.' || c == '+' || c == '#') {
            code = 1;
        }
        o[k++] = lower(c);
        i++;
    }
    /* "1,000" and "3.14" are numbers, not identifiers */
    if (code && ndig > 0 && nup + nlow == 0) code = 0;
    if (k > 0 && o[k - 1] == '.') k--;
    /* "U.S.", "U.K.", "D.C.": the letters ("US"); not "a.m." and "p.m." ("am" is a verb) */
    int dotted = k >= 3 && k % 2 == 1 && !(k == 3 && o[1] == '.' && o[2] == 'm');
    for (size_t i = 0; i < k && dotted; i++)
        dotted = i % 2 ? o[i] == '.' : is_lower((unsigned char)o[i]);
    if (dotted) {
        for (size_t i = 2; i < k; i += 2)
            o[i / 2] = o[i];
        k = (k + 1) / 2;
        code = 0;
    }

    size_t base = k;
    const char *neg = NULL;
    if (apos != (size_t)-1 && apos > 0) {
        const char *suf = o + apos;
        size_t sl = k - apos;
        if (sl == 1 && suf[0] == 's') {
            base = apos; /* France's, what's, it's */
            /* after a pronoun or question word, 's is "is": what's = what is */
            static const char *const is_words[] = {"what", "where", "who",   "how",   "when",
                                                   "why",  "that",  "it",    "there", "here",
                                                   "he",   "she",   "which", NULL};
            for (int i = 0; is_words[i]; i++)
                if (strlen(is_words[i]) == base && strncasecmp(o, is_words[i], base) == 0)
                    neg = "is";
        } else if (sl == 1 && suf[0] == 't' && o[apos - 1] == 'n') {
            base = apos - 1; /* can't, don't, won't */
            neg = "not";
        } else if ((sl == 2 && (memcmp(suf, "re", 2) == 0 || memcmp(suf, "ve", 2) == 0 ||
                                memcmp(suf, "ll", 2) == 0)) ||
                   (sl == 1 && (suf[0] == 'd' || suf[0] == 'm'))) {
            base = apos; /* we're, I've, you'll, I'd, I'm */
        }
    }
    /* typed without the apostrophe: dont, doesnt, cant, wont */
    if (apos == (size_t)-1 && k >= 4 && o[k - 2] == 'n' && o[k - 1] == 't') {
        static const char *const bare[] = {"dont",    "doesnt",   "didnt",   "isnt",  "arent",
                                           "wasnt",   "werent",   "cant",    "wont",  "wouldnt",
                                           "shouldnt", "couldnt", "havent",  "hasnt", "hadnt",
                                           "mustnt",  "aint",     "shant",   "neednt"};
        for (size_t i = 0; i < sizeof bare / sizeof *bare; i++)
            if (k == strlen(bare[i]) && !memcmp(o, bare[i], k)) {
                base = k - 2;
                neg = "not";
                break;
            }
    }
    /* whats, hows, wheres: a question word's "is" typed without the apostrophe */
    if (apos == (size_t)-1 && !neg && k >= 4 && o[k - 1] == 's') {
        static const char *const bare[] = {"whats", "hows", "wheres", "whos", "whens", "thats"};
        for (size_t i = 0; i < sizeof bare / sizeof *bare; i++)
            if (k == strlen(bare[i]) && !memcmp(o, bare[i], k)) {
                base = k - 1;
                neg = "is"; /* as with the apostrophe: "whos" is "who is", not "who was" */
            }
    }
    const char *word = o;
    if (neg && neg[0] == 'n') {
        /* ca(n't) wo(n't) sha(n't) ai(n't) lose a letter to the contraction */
        static const struct {
            const char *c, *full;
        } fix[] = {{"ca", "can"}, {"wo", "will"}, {"sha", "shall"}, {"ai", "is"}};
        for (size_t i = 0; i < sizeof fix / sizeof *fix; i++)
            if (base == strlen(fix[i].c) && memcmp(o, fix[i].c, base) == 0) {
                word = fix[i].full;
                base = strlen(fix[i].full);
                break;
            }
    }
    if (base == 0 && !neg) return;

    if (upfirst == 1) flags |= F_UPFIRST;
    if (nup >= 2 && nlow == 0) flags |= F_ACRO;
    if (mixed) flags |= F_MIXED;
    if (code) flags |= F_CODE;
    if (nup == 1 && upfirst == 1 && !(flags & F_INITIAL)) flags |= F_CAP;
    if (ndig) flags |= F_NUM;

    /* WWI, WWII, WW1, WW2: read as "World War I" and "World War II" are */
    int war = base == 3 && (!memcmp(word, "wwi", 3) || !memcmp(word, "ww1", 3))    ? 1
              : (base == 4 && !memcmp(word, "wwii", 4)) || (base == 3 && !memcmp(word, "ww2", 3))
                  ? 2
                  : 0;
    if (war) {
        const uint16_t keep = flags & (F_INITIAL | F_QUOTED);
        static const char *const parts[] = {"world", "war", "1", "2"};
        for (int i = 0; i < 3; i++) {
            const char *w = i < 2 ? parts[i] : parts[1 + war];
            tok *t = push_tok(sd, w, strlen(w),
                              (uint16_t)(keep | (i < 2 ? F_CAP | F_UPFIRST : F_NUM)));
            if (t) classify(sd, t);
        }
        return;
    }

    if (base > 0) {
        tok *t = push_tok(sd, word, base, flags);
        if (!t) return;
        classify(sd, t);
        if ((size_t)nup == n && roman_value((const char *)p + a, n) > 0) {
            t->flags = (uint16_t)((t->flags | F_NUM) & ~F_ACRO);
            t->num = (int16_t)sd->nnum;
            add_num_value(sd, roman_value((const char *)p + a, n), 0);
        } else if (n == 1 && p[a] == 'I' && sd->nt >= 3 && sd->t[sd->nt - 2].len == 3 &&
                   !memcmp(sd->t[sd->nt - 2].s, "war", 3) && sd->t[sd->nt - 3].len == 5 &&
                   !memcmp(sd->t[sd->nt - 3].s, "world", 5)) {
            t->flags |= F_NUM; /* World War I: the numeral, not the pronoun */
            t->num = (int16_t)sd->nnum;
            add_num_value(sd, 1, 0);
        }
        if (t->len == 1 && t->s[0] == 'i') t->flags &= (uint16_t) ~(F_CAP | F_ACRO);
    }
    if (neg) {
        tok *t = push_tok(sd, neg, strlen(neg), flags & (F_INITIAL | F_QUOTED));
        if (t) classify(sd, t);
    }
}

/* Whether a number word or numeral is an ordinal: "first", "second", "third", "fifth",
 * "twentieth", "3rd", "21st". */
static int ordinal(const tok *t)
{
    if (t->len >= 3 && is_digit((unsigned char)t->s[t->len - 3]))
        return !memcmp(t->s + t->len - 2, "st", 2) || !memcmp(t->s + t->len - 2, "nd", 2) ||
               !memcmp(t->s + t->len - 2, "rd", 2) || !memcmp(t->s + t->len - 2, "th", 2);
    return (t->len == 5 && !memcmp(t->s, "first", 5)) ||
           (t->len == 6 && !memcmp(t->s, "second", 6)) ||
           (t->len == 5 && !memcmp(t->s, "third", 5)) ||
           (t->len > 3 && !memcmp(t->s + t->len - 2, "th", 2));
}

/* The denominator a fraction's word names: "third(s)" 3 ... "tenth(s)" 10, "half"/"halves"
 * 2, "quarter(s)" 4; else 0. */
static int denominator(const tok *t)
{
    static const char *const w[] = {"half", "third", "quarter", "fourth", "fifth", "sixth",
                                    "seventh", "eighth", "ninth", "tenth"};
    static const int d[] = {2, 3, 4, 4, 5, 6, 7, 8, 9, 10};
    if (t->len == 6 && !memcmp(t->s, "halves", 6))
        return 2;
    for (size_t k = 0; k < sizeof w / sizeof *w; k++) {
        size_t n = strlen(w[k]);
        if ((t->len == n || (t->len == n + 1 && t->s[n] == 's')) && !memcmp(t->s, w[k], n))
            return d[k];
    }
    return 0;
}

/* Whether sd's tokens from i say "and a half" (or "and one half"). */
static int and_a_half(const side *sd, int i)
{
    return i + 2 < sd->nt && is_word(&sd->t[i], "and") &&
           (is_word(&sd->t[i + 1], "a") || is_word(&sd->t[i + 1], "one")) &&
           is_word(&sd->t[i + 2], "half");
}

/* The index of sd's first token that is the word w, or -1. */
static int place_of(const side *sd, const char *w)
{
    for (int i = 0; i < sd->nt; i++)
        if (is_word(&sd->t[i], w)) return i;
    return -1;
}

/* Collects numbers: numerals, number words ("twenty-five", "two hundred", "a dozen"),
 * ordinals ("2nd", "second"), digits inside words ("K2", "IPv6", "100km"). */
static int mine(const side *sd, const tok *t);

static void collect_numbers(side *sd)
{
    for (int i = 0; i < sd->nt; i++) {
        tok *t = &sd->t[i];
        if (t->num >= 0) continue;
        /* "first" as an adverb counts nothing: "take it without eating first", "which came
         * first, the chicken or the egg", "first of all"; "the first president", "my first
         * car" and "first place" are ordinals */
        const tok *next = i + 1 < sd->nt ? &sd->t[i + 1] : NULL; /* ("first US president") */
        const int aid = next && is_word(next, "aid"); /* first aid: care, not a count */
        if (t->len == 5 && !memcmp(t->s, "first", 5) &&
            (aid || ((!next || ((next->flags & F_STOP) && !(next->flags & F_ACRO))) &&
                     !(i > 0 && (t[-1].flags & F_DROP))))) {
            t->flags &= (uint16_t)~F_NUM;
            continue;
        }
        /* "per second", "a second", "each second": the unit of time, not 2nd */
        if (i > 0 && is_word(t, "second") &&
            (is_word(&t[-1], "per") || is_word(&t[-1], "a") || is_word(&t[-1], "each") ||
             is_word(&t[-1], "every"))) {
            t->flags &= (uint16_t)~F_NUM;
            continue;
        }
        /* "into one" (merge two lists into one) is a pronoun, not a count */
        if (i > 0 && t->len == 3 && !memcmp(t->s, "one", 3) && sd->t[i - 1].len == 4 &&
            !memcmp(sd->t[i - 1].s, "into", 4)) {
            t->flags &= (uint16_t)~F_NUM;
            continue;
        }
        /* "one" after an ordinal is a pronoun: "the second one" is 2, "the 3rd one" 3 */
        if (i > 0 && (sd->t[i - 1].flags & F_NUM) && ordinal(&sd->t[i - 1]) &&
            ((t->len == 3 && !memcmp(t->s, "one", 3)) ||
             (t->len == 4 && !memcmp(t->s, "ones", 4)))) {
            t->flags &= (uint16_t)~F_NUM;
            continue;
        }
        int nw = t->lex >= 0 ? lex_num(t->lex) : -1;
        if (nw < 0) {
            int e = lex_find(t->s, t->len);
            nw = e >= 0 ? lex_num(e) : -1;
        }
        /* a fraction in words: "one third", "two thirds", "three quarters" are 1/3, 2/3,
         * 3/4; "a third" (of, or alone) 1/3, as "a quarter" is 1/4 */
        int den = 0, two = 0;
        long long count = 0;
        if (next && nw >= 0 && t->len == strlen(num_words[nw].w) && num_words[nw].kind == 0 &&
            num_words[nw].v >= 1 && num_words[nw].v <= 9 && !ordinal(t) &&
            (den = denominator(next)) &&
            !(i + 2 < sd->nt && (sd->t[i + 2].flags & F_JOINED))) /* "two third-party" */
            count = num_words[nw].v, two = 1;
        else if (i > 0 && is_word(&t[-1], "a") && ordinal(t) && (den = denominator(t)) > 2 &&
                 (!next || is_word(next, "of") || (next->flags & F_STOP)))
            count = 1;
        if (count) {
            char b[NUM_LEN];
            int k = snprintf(b, sizeof b, "%lld/%d", count, den);
            t->flags |= F_NUM;
            t->num = (int16_t)sd->nnum;
            if (two) {
                sd->t[i + 1].flags |= F_NUM;
                sd->t[i + 1].num = t->num;
                i++;
            }
            add_num(sd, b, (size_t)k, 0);
            continue;
        }
        /* "seconds" is time, "second" may be 2nd; "one" alone is weak */
        if (nw >= 0 && !(t->len != strlen(num_words[nw].w))) {
            long long total = 0, cur = 0;
            int j = i, words = 0, frac = num_words[nw].v < 0, last_kind = -1;
            while (j < sd->nt) {
                tok *u = &sd->t[j];
                int e = lex_find(u->s, u->len);
                int w = e >= 0 ? lex_num(e) : -1;
                if (w < 0 && j > i && u->len == 3 && memcmp(u->s, "and", 3) == 0 &&
                    j + 1 < sd->nt && cur >= 100) {
                    j++;
                    continue;
                }
                if (w < 0 || num_words[w].v < 0 || frac) break;
                /* a unit after a unit is no one number ("two third-party apps"); after a
                 * ten it is ("twenty third") */
                if (words && num_words[w].kind == 0 && last_kind == 0) break;
                /* a year read in pairs: "nineteen eighty-four", "twenty twenty" */
                if (words && num_words[w].kind == 1 && !total && cur >= 10 && cur < 100 &&
                    (last_kind == 1 || (last_kind == 0 && cur < 20)))
                    cur *= 100;
                last_kind = num_words[w].kind;
                switch (num_words[w].kind) {
                case 0:
                    cur += num_words[w].v;
                    break;
                case 1:
                    cur += num_words[w].v;
                    break;
                case 2:
                    cur = (cur ? cur : 1) * 100;
                    break;
                case 3:
                    total += (cur ? cur : 1) * num_words[w].v;
                    cur = 0;
                    break;
                case 4:
                    cur = (cur ? cur : 1) * 12;
                    break;
                }
                u->flags |= F_NUM;
                u->num = (int16_t)sd->nnum;
                words++;
                j++;
                if (ordinal(u)) break; /* an ordinal ends its number */
            }
            if (frac) {
                t->flags |= F_NUM;
                t->num = (int16_t)sd->nnum;
                add_num_value(sd, num_words[nw].v, 0);
                continue;
            }
            /* "one", "once", "single" alone are as often a way of speaking as a count */
            int weak = words == 1 && num_words[nw].v == 1 &&
                       !(t->len == 5 && memcmp(t->s, "first", 5) == 0);
            /* "two and a half" is 2.5 */
            if (and_a_half(sd, j)) {
                char b[NUM_LEN];
                int k = snprintf(b, sizeof b, "%lld.5", total + cur);
                for (int x = j; x <= j + 2; x++) {
                    sd->t[x].flags |= F_NUM;
                    sd->t[x].num = (int16_t)sd->nnum;
                }
                add_num(sd, b, (size_t)k, 0);
                i = j + 2;
                continue;
            }
            add_num_value(sd, total + cur, weak);
            i = j - 1;
            continue;
        }
        if (!(t->flags & F_NUM)) continue;
        /* text speak: "how 2 boil an egg", "tips 4 learning piano", "go 4 dinner" */
        if (t->len == 1 && (t->s[0] == '2' || t->s[0] == '4') && i > 0 && next &&
            !(next->flags & (F_NUM | F_STOP)) && next->s[next->len - 1] != 's') {
            static const char *const lead[] = {"how", "way", "go", "get", "tips", "time",
                                               "want", "need", "going", "trying", "try",
                                               "wanna", "ways", "best", "easiest"};
            int speak = ONE_OF(&sd->t[i - 1], lead);
            /* "to" or "for", a function word; and a weak number, that agrees with none on
             * the other side but not with another ("best 2 player games" vs "best 4") */
            if (speak && t->raw && t->rawlen == 1) {
                t->flags = (uint16_t)((t->flags & ~F_NUM) | F_STOP);
                t->num = (int16_t)sd->nnum;
                add_num(sd, t->s, 1, 1);
                continue;
            }
        }
        /* a numeral: -12, 3.14, 1,000, 2nd, 15 (then maybe "million") */
        const char *s = t->s;
        size_t n = t->len, k = 0;
        char b[NUM_LEN];
        size_t bl = 0;
        if (s[0] == '-') b[bl++] = '-', k = 1;
        size_t digits_end = k;
        while (digits_end < n && (is_digit((unsigned char)s[digits_end]) || s[digits_end] == ',' ||
                                  s[digits_end] == '.'))
            digits_end++;
        int plain = digits_end > k && is_digit((unsigned char)s[k]);
        /* "20k" is 20000, "1.5k" 1500 (a 401k is a retirement plan's name; a 5k is a race's
         * kilometres, and a 10k said with a run, a race or miles) */
        static const char *const runs[] = {"run",  "ran", "running", "race",
                                           "mile", "miles", "km",    "jog"};
        int race = (n == 2 && !memcmp(s, "5k", 2)) ||
                   (n == 3 && !memcmp(s, "10k", 3) && SAYS_ONE_OF(sd, runs));
        /* "20M" (a capital: "20m" is metres or minutes) is 20000000 */
        int million = n == digits_end + 1 && s[digits_end] == 'm' && t->raw && t->rawlen == n &&
                      t->raw[digits_end] == 'M';
        if (plain && k == 0 && n == digits_end + 1 && (s[digits_end] == 'k' || million) &&
            !race && !memchr(s, ',', digits_end) && !(n == 4 && !memcmp(s, "401", 3))) {
            long long whole = 0, part = 0, scale = 1000, unit = million ? 1000000 : 1000;
            size_t x = 0;
            for (; x < digits_end && s[x] != '.' && whole < 1000000000LL; x++)
                whole = whole * 10 + (s[x] - '0');
            if (x < digits_end && s[x] == '.')
                for (x++; x < digits_end && scale > 1 && is_digit((unsigned char)s[x]); x++) {
                    scale /= 10;
                    part += (s[x] - '0') * scale;
                }
            if (x == digits_end && whole < 1000000000LL) {
                t->num = (int16_t)sd->nnum;
                add_num_value(sd, whole * unit + part * (unit / 1000), 0);
                continue;
            }
        }
        if (plain && digits_end < n) {
            const char *rest = s + digits_end;
            size_t rl = n - digits_end;
            plain = rl == 2 && (memcmp(rest, "st", 2) == 0 || memcmp(rest, "nd", 2) == 0 ||
                                memcmp(rest, "rd", 2) == 0 || memcmp(rest, "th", 2) == 0);
        }
        if (plain) {
            int dec = 0;
            for (size_t x = k; x < digits_end && bl < NUM_LEN - 1; x++) {
                if (s[x] == ',') continue;
                if (s[x] == '.') dec = 1;
                b[bl++] = s[x];
            }
            t->num = (int16_t)sd->nnum;
            /* "5 million", "3 dozen", "1.5 million" (a decimal only before a thousand or
             * more, whole there) */
            if (i + 1 < sd->nt) {
                tok *u = &sd->t[i + 1];
                int e = lex_find(u->s, u->len);
                int w = e >= 0 ? lex_num(e) : -1;
                long long v = 0, scale = 1;
                int places = 0, dots = 0;
                for (size_t x = (b[0] == '-'); x < bl && v < 1000000000LL && places <= 3; x++) {
                    if (b[x] == '.') {
                        dots++;
                        continue;
                    }
                    v = v * 10 + (b[x] - '0');
                    places += dots > 0;
                }
                for (int x = 0; x < places && x < 4; x++)
                    scale *= 10;
                if (w >= 0 &&
                    (num_words[w].kind == 3 || num_words[w].kind == 4 || num_words[w].kind == 2) &&
                    u->len == strlen(num_words[w].w) && v < 1000000000LL && places <= 3 &&
                    dots <= 1 && v <= LLONG_MAX / (num_words[w].v / scale) &&
                    (!dec || (num_words[w].kind == 3 && num_words[w].v % scale == 0))) {
                    v = v * (num_words[w].v / scale);
                    if (b[0] == '-') v = -v;
                    u->flags |= F_NUM;
                    u->num = t->num;
                    add_num_value(sd, v, 0);
                    i++;
                    continue;
                }
            }
            /* "2 and a half" is 2.5, as "two and a half" is */
            if (!dec && b[0] != '-' && bl < NUM_LEN - 3 && and_a_half(sd, i + 1)) {
                memcpy(b + bl, ".5", 2);
                bl += 2;
                for (int x = i + 1; x <= i + 3; x++) {
                    sd->t[x].flags |= F_NUM;
                    sd->t[x].num = t->num;
                }
                add_num(sd, b, bl, 0);
                i += 3;
                continue;
            }
            /* "1/4 cup" is a quarter cup (the tokens "1" and "4", a slash between them): a
             * fraction under 1; not a split, "60/40", "50/30/20", nor "24/7" */
            tok *u = i + 1 < sd->nt ? &sd->t[i + 1] : NULL;
            size_t ud = 0;
            long long num = 0, den = 0;
            while (u && ud < u->len && ud < 6 && is_digit((unsigned char)u->s[ud]))
                den = den * 10 + (u->s[ud++] - '0');
            for (size_t x = 0; x < bl && x < 6; x++)
                num = num * 10 + (b[x] - '0');
            /* (read within the side's text: its tokens' raw words lie in it, in order) */
            const char *end = sd->text + sd->textlen;
            if (!dec && b[0] != '-' && bl <= 6 && u && t->raw && u->raw && /* 6+1+6 < NUM_LEN */
                mine(sd, t) && mine(sd, u) && u->raw - t->raw == (ptrdiff_t)t->rawlen + 1 &&
                t->raw[t->rawlen] == '/' && ud && ud == u->len && num < den &&
                (u->raw + u->rawlen == end || u->raw[u->rawlen] != '/') &&
                !(t->raw > sd->text && t->raw[-1] == '/')) {
                b[bl++] = '/';
                memcpy(b + bl, u->s, u->len);
                bl += u->len;
                u->num = t->num;
                add_num(sd, b, bl, 0);
                i++;
                continue;
            }
            /* "calories in 1 banana": one thing, as "a banana" says it (weak, as "one" is) */
            int one = bl == 1 && b[0] == '1' && i + 1 < sd->nt &&
                      !(sd->t[i + 1].flags & (F_STOP | F_NUM)) &&
                      sd->t[i + 1].nlen == sd->t[i + 1].len;
            add_num(sd, b, bl, one);
            continue;
        }
        /* "the 1900s", "the 80s": a decade, not the year 1900 */
        size_t dg = 0;
        while (dg < n && is_digit((unsigned char)s[dg]))
            dg++;
        if (dg >= 2 && dg + 1 == n && s[dg] == 's' && s[dg - 1] == '0') {
            t->num = (int16_t)sd->nnum;
            add_num(sd, s, n, 0);
            continue;
        }
        /* digits inside a word: each run is a number; not in a name the lexicon knows as
         * another's ("k8s" is Kubernetes, not 8) */
        if (t->lex >= 0 && lex_has(t->lex, K_SYN)) continue;
        for (size_t x = 0; x < n;) {
            if (!is_digit((unsigned char)s[x])) {
                x++;
                continue;
            }
            size_t y = x;
            while (y < n && is_digit((unsigned char)s[y]))
                y++;
            if (t->num < 0) t->num = (int16_t)sd->nnum;
            add_num(sd, s + x, y - x, 0);
            x = y;
        }
    }
    /* past MAX_NUM a token was given an index add_num() then had no room for */
    for (int i = 0; i < sd->nt; i++)
        if (sd->t[i].num >= sd->nnum)
            sd->t[i].num = -1;
}

static int tok_eq(const tok *a, const tok *b)
{
    return (a->nlen == b->nlen && memcmp(a->n, b->n, a->nlen) == 0) ||
           (a->lemlen == b->lemlen && memcmp(a->lem, b->lem, a->lemlen) == 0);
}

/* Whether p[a, b) is a prefix that makes another word of the one its hyphen joins. */
static int bound_prefix(const unsigned char *p, size_t a, size_t b)
{
    static const char *const pre[] = {"step", "ex",    "vice",  "great", "co",    "anti",
                                      "non",  "semi",  "pre",   "post",  "sub",   "counter",
                                      "mini", "self",  "multi", "inter", "intra", "un",
                                      "mid",  "re",    "de",    "dis",   "super", "ultra",
                                      NULL};
    for (int k = 0; pre[k]; k++) {
        size_t n = strlen(pre[k]);
        if (b - a == n && strncasecmp((const char *)p + a, pre[k], n) == 0) return 1;
    }
    return 0;
}

/* Whether a word's singular is in the lexicon as kind: "features" is a K_CLASS word as
 * "feature" is. */
static int singular_is(const tok *t, int kind)
{
    return lex_has(lex_find(t->n, t->nlen), kind);
}

static void tokenize(side *sd, const char *text, size_t len)
{
    const unsigned char *p = (const unsigned char *)text;
    sd->nt = 0;
    sd->used = 0;
    sd->nnum = 0;
    sd->overflow = 0;
    sd->text = text;
    sd->textlen = len;
    sd->data_at = len;
    /* the last colon a space follows, with something after it that is not a question
     * ("python: how do I reverse a list?") */
    for (size_t k = len; k-- > 0;)
        if (p[k] == ':' && k + 1 < len && (p[k + 1] == ' ' || p[k + 1] == '\n')) {
            size_t d = k + 1, w;
            while (d < len && (p[d] == ' ' || p[d] == '\n' || p[d] == '\t' || p[d] == '\r'))
                d++;
            char lw[8] = "";
            for (w = d; w < len && w - d < sizeof lw && is_alpha(p[w]); w++)
                lw[w - d] = (char)(p[w] | 0x20);
            int e = lex_find(lw, w - d);
            if (d < len && !memchr(p + d, '?', len - d) &&
                !(e >= 0 && (lex_has(e, K_WH) || lex_has(e, K_PAST) || lex_has(e, K_NOW) ||
                             (w - d == 4 && !memcmp(lw, "what", 4)))))
                sd->data_at = d;
            break;
        }
    int initial = 1, in_dq = 0, in_bq = 0, in_sq = 0, joined = 0;
    size_t i = 0;
    while (i < len && !sd->overflow) {
        unsigned char c = p[i];
        int kind = 0;
        size_t pl = c >= 0x80 ? upunct(p, i, len, &kind) : 0;
        int wb = c >= 0x80 ? pl == 0 : (is_alnum(c) || c == '_');
        if (c == '-' && i + 1 < len && is_digit(p[i + 1]) && (i == 0 || !word_byte(p, i - 1, len)))
            wb = 1; /* a negative number */
        if (c == '$' && i + 1 < len && is_digit(p[i + 1]))
            wb = 1; /* "$50", read as "50 dollar" (emit_word()) */
        if (!wb) {
            joined = c == '-' && i > 0 && word_byte(p, i - 1, len) && i + 1 < len &&
                     word_byte(p, i + 1, len);
            if (pl) {
                if ((kind == P_SQUARE || kind == P_CUBE) && sd->nt > 0 && i > 0 &&
                    word_byte(p, i - 1, len)) {
                    tok *t = push_tok(sd, "power", 5, 0);
                    if (t) classify(sd, t);
                    t = push_tok(sd, kind == P_SQUARE ? "2" : "3", 1, F_NUM);
                    if (t) classify(sd, t);
                }
                if (kind == P_DQ_OPEN)
                    in_dq = 1;
                else if (kind == P_DQ_CLOSE)
                    in_dq = 0;
                else if (kind == P_SQ_OPEN)
                    in_sq = 1;
                else if (kind == P_APOS)
                    in_sq = 0;
                i += pl;
                continue;
            }
            if (c == '"')
                in_dq = !in_dq;
            else if (c == '`')
                in_bq = !in_bq;
            else if (c == '\'') {
                int prev_w = i > 0 && word_byte(p, i - 1, len);
                int next_w = i + 1 < len && word_byte(p, i + 1, len);
                if (!prev_w && next_w)
                    in_sq = 1;
                else if (prev_w && !next_w)
                    in_sq = 0;
            } else if (c == '.' || c == '?' || c == '!' || c == ';' || c == ':' || c == '\n') {
                initial = 1;
            } else if (c == '(' && sd->nt > 0 && i > 0 && word_byte(p, i - 1, len)) {
                sd->t[sd->nt - 1].flags |= F_CODE; /* f( */
            } else if (c == '%' && sd->nt > 0 && i > 0 && is_digit(p[i - 1])) {
                tok *t = push_tok(sd, "percent", 7, 0); /* "15%" is "15 percent" */
                if (t) classify(sd, t);
            } else if (c == '^' && sd->nt > 0 && i > 0 && is_alnum(p[i - 1]) && i + 1 < len &&
                       is_alnum(p[i + 1])) {
                tok *t = push_tok(sd, "power", 5, 0); /* "2^10" is "2 to the power of 10" */
                if (t) classify(sd, t);
            }
            i++;
            continue;
        }
        size_t j = i + 1, seg = i;
        while (j < len) {
            unsigned char d = p[j];
            size_t ql = d >= 0x80 ? upunct(p, j, len, &kind) : 0;
            if (d >= 0x80 && ql == 0) {
                j++;
                continue;
            }
            if (is_alnum(d) || d == '_') {
                j++;
                continue;
            }
            /* an apostrophe inside a word: don't, France's, o'clock */
            size_t al = d == '\'' ? 1 : (ql && kind == P_APOS) ? ql : 0;
            if (al && j + al < len && is_alpha(p[j + al])) {
                j += al;
                continue;
            }
            /* 3.14, node.js, e.g; 1,000 */
            if (d == '.' && j + 1 < len && is_alnum(p[j + 1]) && is_alnum(p[j - 1])) {
                j++;
                continue;
            }
            if (d == ',' && is_digit(p[j - 1]) && j + 3 < len + 0 && is_digit(p[j + 1]) &&
                is_digit(p[j + 2]) && is_digit(p[j + 3]) && (j + 4 >= len || !is_digit(p[j + 4]))) {
                j += 4;
                continue;
            }
            /* step-mother, co-founder, ex-wife, great-grandfather, non-profit: a bound
             * prefix makes another word (a stepmother is not a mother), read glued, as is
             * a brother-in-law */
            if (d == '-' && j + 1 < len && is_alpha(p[j + 1]) && bound_prefix(p, seg, j)) {
                seg = ++j;
                continue;
            }
            /* "W-2", "F-150", "I-95": one or two letters and a number, one name ("w2") */
            if (d == '-' && j - i <= 2 && j + 1 < len && is_digit(p[j + 1]) && is_alpha(p[i]) &&
                is_alpha(p[j - 1])) {
                size_t e = j + 1;
                while (e < len && is_digit(p[e]))
                    e++;
                if (e == len || !is_alnum(p[e])) {
                    j = e;
                    break;
                }
            }
            if (d == '-' && len - j >= 7 && strncasecmp((const char *)p + j, "-in-law", 7) == 0 &&
                (len - j == 7 || !is_alnum(p[j + 7]))) {
                j += 7;
                continue;
            }
            /* c++, c#, f# */
            if (d == '+' && j + 1 < len && p[j + 1] == '+' && is_alpha(p[j - 1])) {
                j += 2;
                break;
            }
            if (d == '#' && j - i <= 2 && is_alpha(p[j - 1])) {
                j++;
                break;
            }
            break;
        }
        unsigned flags = 0;
        if (initial) flags |= F_INITIAL;
        if (in_dq || in_bq || in_sq) flags |= F_QUOTED;
        if (in_bq) flags |= F_CODE;
        /* a command's option ("ls -a", "--all") and an escape ("\d"): code, read in its case */
        if (i > 0 && (p[i - 1] == '\\' ||
                      (p[i - 1] == '-' && (i == 1 || p[i - 2] == ' ' || p[i - 2] == '-'))))
            flags |= F_CODE;
        if (joined) flags |= F_JOINED;
        joined = 0;
        int first = sd->nt;
        emit_word(sd, p, i, j, flags);
        for (int k = first; k < sd->nt; k++) {
            sd->t[k].raw = text + i;
            sd->t[k].rawlen = (uint16_t)(j - i);
        }
        initial = 0;
        i = j;
    }
    /* "back up" (the verb) is "backup": its opposite is "restore" */
    for (int k = 0; k + 1 < sd->nt; k++) {
        tok *t = &sd->t[k], *u = &sd->t[k + 1];
        if (t->len != 4 || memcmp(t->s, "back", 4) || u->len != 2 || memcmp(u->s, "up", 2))
            continue;
        uint16_t keep = t->flags & (F_INITIAL | F_QUOTED);
        memmove(u, u + 1, sizeof *u * (size_t)(sd->nt - k - 2));
        sd->nt--;
        *t = (tok){.s = "backup", .len = 6, .flags = keep, .lex = -1, .num = -1};
        classify(sd, t);
    }
    /* "the United States" is "the US", "the United Kingdom" "the UK" */
    for (int k = 0; k + 1 < sd->nt; k++) {
        tok *t = &sd->t[k], *u = &sd->t[k + 1];
        if (t->len != 6 || memcmp(t->s, "united", 6)) continue;
        const char *as = u->len == 6 && !memcmp(u->s, "states", 6)    ? "us"
                         : u->len == 7 && !memcmp(u->s, "kingdom", 7) ? "uk"
                                                                       : NULL;
        if (!as) continue;
        uint16_t keep = t->flags & (F_INITIAL | F_QUOTED);
        memmove(u, u + 1, sizeof *u * (size_t)(sd->nt - k - 2));
        sd->nt--;
        *t = (tok){.s = as, .len = 2, .flags = (uint16_t)(keep | F_ACRO | F_UPFIRST), .lex = -1,
                   .num = -1};
        classify(sd, t);
    }
    /* "w/o" is "without" */
    for (int k = 0; k + 1 < sd->nt; k++) {
        tok *t = &sd->t[k], *u = &sd->t[k + 1];
        if (!is_word(t, "w") || !is_word(u, "o") || !t->raw || !u->raw ||
            u->raw != t->raw + 2 || t->raw[1] != '/')
            continue;
        uint16_t keep = t->flags & (F_INITIAL | F_QUOTED);
        memmove(u, u + 1, sizeof *u * (size_t)(sd->nt - k - 2));
        sd->nt--;
        *t = (tok){.s = "without", .len = 7, .flags = keep, .lex = -1, .num = -1};
        classify(sd, t);
    }
    /* text speak for a question's words: "hw do i", "wat should i", "y is the sky blue",
     * "what r index funds" */
    for (int k = 0; k < sd->nt; k++) {
        tok *t = &sd->t[k];
        const tok *next = k + 1 < sd->nt ? &sd->t[k + 1] : NULL;
        const char *as = NULL;
        if (t->flags & (F_QUOTED | F_CODE | F_JOINED)) continue;
        if (is_word(t, "hw") && next && (next->flags & F_STOP))
            as = "how";
        else if ((is_word(t, "wat") || is_word(t, "wut")) && next && (next->flags & F_STOP))
            as = "what";
        else if (is_word(t, "y") && (t->flags & F_INITIAL) && next &&
                 (is_word(next, "is") || is_word(next, "are") || is_word(next, "do") ||
                  is_word(next, "does") || is_word(next, "did") || is_word(next, "would") ||
                  is_word(next, "can") || is_word(next, "will"))) /* ("won't" is "will not") */
            as = "why";
        else if (is_word(t, "r") && t->raw && t->raw[0] == 'r' && k > 0 && next &&
                 ((sd->t[k - 1].flags & F_WH) || is_word(&sd->t[k - 1], "what") ||
                  is_word(&sd->t[k - 1], "how") || is_word(&sd->t[k - 1], "where")))
            as = "are";
        if (!as) continue;
        *t = (tok){.s = as, .len = (uint16_t)strlen(as), .flags = t->flags & F_INITIAL,
                   .lex = -1, .num = -1, .raw = t->raw, .rawlen = t->rawlen};
        classify(sd, t);
    }
    /* "w/ a US license" is "with" */
    for (int k = 0; k < sd->nt; k++) {
        tok *t = &sd->t[k];
        const char *end = sd->text + sd->textlen;
        if (!is_word(t, "w") || !t->raw || t->raw + 1 >= end || t->raw[1] != '/' ||
            (t->raw + 2 < end && is_alnum((unsigned char)t->raw[2])))
            continue;
        *t = (tok){.s = "with", .len = 4, .flags = t->flags & (F_INITIAL | F_QUOTED), .lex = -1,
                   .num = -1, .raw = t->raw, .rawlen = t->rawlen};
        classify(sd, t);
    }
    /* "my 4yo", "a 7 yo": a 4 year old */
    for (int k = 0; k < sd->nt && sd->nt + 1 < MAX_TOK; k++) {
        tok *t = &sd->t[k];
        size_t d = 0;
        while (d < t->len && is_digit((unsigned char)t->s[d]))
            d++;
        int glued = d && t->len == d + 2 && !memcmp(t->s + d, "yo", 2);
        int apart = !d && k > 0 && is_word(t, "yo") && sd->t[k - 1].len &&
                    is_digit((unsigned char)sd->t[k - 1].s[sd->t[k - 1].len - 1]);
        if ((!glued && !apart) || (glued && sd->nt + 2 >= MAX_TOK)) continue;
        uint16_t keep = t->flags & (F_INITIAL | F_QUOTED);
        int at = k + glued; /* where "year" goes */
        memmove(&sd->t[at + 2], &sd->t[k + 1], sizeof *t * (size_t)(sd->nt - k - 1));
        sd->nt += 1 + glued;
        if (glued) {
            *t = (tok){.s = t->s, .len = (uint16_t)d, .flags = keep | F_NUM, .lex = -1, .num = -1,
                       .raw = t->raw, .rawlen = t->rawlen};
            classify(sd, t);
        }
        static const char *const age[] = {"year", "old"};
        for (int x = 0; x < 2; x++) {
            tok *u = &sd->t[at + x];
            *u = (tok){.s = age[x], .len = (uint16_t)strlen(age[x]),
                       .flags = (uint16_t)((keep & F_QUOTED) | F_JOINED), .lex = -1, .num = -1,
                       .raw = t->raw, .rawlen = t->rawlen};
            classify(sd, u);
        }
        k = at + 1;
    }
    /* avoiding in other words: "stay away from", "steer clear of", "keep out of", "hold
     * off on" are "avoid"; "give up" is "quit"; "the most recent" is "the latest" */
    static const struct {
        const char *w[3], *as;
    } phrase[] = {{{"stay", "away", "from"}, "avoid"},     {{"stayed", "away", "from"}, "avoid"},
                  {{"staying", "away", "from"}, "avoid"},  {{"keep", "away", "from"}, "avoid"},
                  {{"steer", "clear", "of"}, "avoid"},     {{"steering", "clear", "of"}, "avoid"},
                  {{"keep", "out", "of"}, "avoid"},        {{"hold", "off", "on"}, "avoid"},
                  {{"give", "up", NULL}, "quit"},          {{"giving", "up", NULL}, "quit"},
                  {{"gave", "up", NULL}, "quit"},          {{"most", "recent", NULL}, "latest"},
                  {{"cut", "out", NULL}, "avoid"},         {{"knock", "down", NULL}, "demolish"},
                  {{"knocked", "down", NULL}, "demolished"}, {{"tear", "down", NULL}, "demolish"},
                  {{"tore", "down", NULL}, "demolished"},  {{"torn", "down", NULL}, "demolished"},
                  {{"cut", "back", "on"}, "reduce"},       {{"cutting", "back", "on"}, "reduce"}};
    for (int k = 0; k < sd->nt; k++)
        for (size_t m = 0; m < sizeof phrase / sizeof *phrase; m++) {
            int len = phrase[m].w[2] ? 3 : 2, ok = k + len <= sd->nt;
            for (int x = 0; ok && x < len; x++)
                ok = is_word(&sd->t[k + x], phrase[m].w[x]) &&
                     !(sd->t[k + x].flags & (F_QUOTED | F_CODE));
            if (!ok) continue;
            tok *t = &sd->t[k];
            uint16_t keep = t->flags & F_INITIAL;
            const char *raw = t->raw;
            uint16_t rawlen = t->rawlen;
            memmove(t + 1, t + len, sizeof *t * (size_t)(sd->nt - k - len));
            sd->nt -= len - 1;
            *t = (tok){.s = phrase[m].as, .len = (uint16_t)strlen(phrase[m].as), .flags = keep,
                       .lex = -1, .num = -1, .raw = raw, .rawlen = rawlen};
            classify(sd, t);
            break;
        }
    /* phrasing that asks nothing: "thanks in advance", "is 97 a prime number" ("prime"
     * says the number) */
    for (int k = 1; k < sd->nt; k++) {
        tok *t = &sd->t[k];
        const tok *before = &sd->t[k - 1];
        if ((is_word(t, "advance") && is_word(before, "in") && k >= 2 &&
             (is_word(&sd->t[k - 2], "thanks") || is_word(&sd->t[k - 2], "you"))) ||
            (is_word(t, "number") && is_word(before, "prime") && k + 1 == sd->nt))
            t->flags |= F_STOP | F_DROP;
    }
    /* "is 97 prime or not", "whether or not": a yes or no asked, nothing denied */
    for (int k = 1; k < sd->nt; k++)
        if (is_word(&sd->t[k], "not") && is_word(&sd->t[k - 1], "or")) {
            sd->t[k].flags = (uint16_t)((sd->t[k].flags & ~F_NEG) | F_STOP | F_DROP);
            sd->t[k - 1].flags |= F_STOP | F_DROP;
        }
    /* "degrees C", "180 c in fahrenheit": the scale (not "1 c flour", a cup; nor the
     * language C) */
    for (int k = 1; k < sd->nt; k++) {
        tok *t = &sd->t[k];
        const tok *before = &sd->t[k - 1], *after = k + 1 < sd->nt ? &sd->t[k + 1] : NULL;
        if (t->len != 1 || (t->s[0] != 'c' && t->s[0] != 'f') || (t->flags & F_CODE))
            continue;
        int degrees = is_word(before, "degrees") || is_word(before, "degree") ||
                      is_word(before, "deg");
        int number = (before->flags & F_NUM) && before->len &&
                     (is_digit((unsigned char)before->s[0]) || before->s[0] == '-') &&
                     (!after || (after->flags & F_STOP));
        if (!degrees && !number) continue;
        const char *scale = t->s[0] == 'f' ? "fahrenheit" : "celsius";
        uint16_t keep = t->flags & (F_INITIAL | F_QUOTED);
        *t = (tok){.s = scale, .len = strlen(scale), .flags = keep, .lex = -1, .num = -1,
                   .raw = t->raw, .rawlen = t->rawlen};
        classify(sd, t);
    }
    collect_numbers(sd);

    /* Title Case and ALL CAPS text says nothing about names: ignore its capitals. */
    int words = 0, caps = 0, acros = 0;
    for (int k = 0; k < sd->nt; k++) {
        tok *t = &sd->t[k];
        if ((t->flags & (F_INITIAL | F_NUM)) || !is_alpha((unsigned char)t->s[0])) continue;
        words++;
        caps += !!(t->flags & F_UPFIRST);
        acros += !!(t->flags & F_ACRO);
    }
    /* "keep / stop / protect X from doing": prevention, a negation of the doing */
    for (int k = 0; k < sd->nt; k++) {
        if (sd->t[k].lex < 0 || !lex_has(sd->t[k].lex, K_KEEP)) continue;
        for (int j = k + 1; j < sd->nt - 1 && j <= k + 5; j++) {
            const tok *g = &sd->t[j + 1];
            if (is_from(&sd->t[j]) && g->len > 4 && !memcmp(g->s + g->len - 3, "ing", 3)) {
                sd->t[j].flags |= F_NEG;
                break;
            }
        }
    }
    int title = words >= 3 && caps * 4 >= words * 3;
    int shout = words >= 3 && acros * 4 >= words * 3;
    for (int k = 0; k < sd->nt; k++) {
        tok *t = &sd->t[k];
        unsigned f = t->flags;
        if (title) f &= ~(unsigned)F_CAP;
        if (shout) f &= ~(unsigned)F_ACRO;
        /* "a for loop", "an if statement", "the where clause": a keyword named */
        if ((f & F_STOP) && k + 1 < sd->nt && singular_is(&sd->t[k + 1], K_KEYNOUN))
            f &= ~(unsigned)(F_STOP | F_DROP | F_WH | F_DIR);
        /* "gluten-free", "sugar-free", "are caffeine free?": without it */
        if (t->len == 4 && !memcmp(t->s, "free", 4) && k > 0 &&
            !(sd->t[k - 1].flags & (F_STOP | F_NUM)) &&
            ((f & F_JOINED) || k + 1 == sd->nt || (sd->t[k + 1].flags & F_STOP)))
            f |= F_NEG;
        /* "free of gluten", "other than oranges", "apart from meat": without it */
        if (k + 1 < sd->nt &&
            ((is_word(t, "free") && is_word(&sd->t[k + 1], "of")) ||
             (is_word(t, "other") && is_word(&sd->t[k + 1], "than")) ||
             (is_word(t, "apart") && is_word(&sd->t[k + 1], "from"))))
            f |= F_NEG;
        /* "find out", "figure out": a particle, not "in" vs "out" */
        if (t->len == 3 && !memcmp(t->s, "out", 3) && k > 0 && !(f & F_JOINED)) {
            /* (not "check out": a hotel's, against its check-in) */
            static const char *const v[] = {"find", "finding", "found", "figure", "figured",
                                            "work", "fill", "sort", "point", "print"};
            const tok *u = &sd->t[k - 1];
            for (size_t i = 0; i < sizeof v / sizeof *v; i++)
                if (u->len == strlen(v[i]) && !memcmp(u->s, v[i], u->len)) {
                    f |= F_STOP | F_DROP;
                    t->lex = -1;
                }
        }
        /* "the US" is not "us" */
        if ((f & F_ACRO) && t->len == 2 && !memcmp(t->s, "us", 2)) f &= ~(unsigned)F_STOP;
        /* "type A", "vitamin A", "plan A": after a noun, a capital A names a letter */
        if ((f & F_CAP) && t->len == 1 && t->s[0] == 'a' && k > 0 &&
            !(sd->t[k - 1].flags & (F_STOP | F_NUM)))
            f &= ~(unsigned)(F_STOP | F_DROP);
        int ent = (f & (F_CAP | F_ACRO | F_MIXED | F_CODE | F_QUOTED)) != 0;
        /* a function word quoted alone is the word asked about: "'a' versus 'an'" */
        int alone = (f & F_QUOTED) && (k == 0 || !(sd->t[k - 1].flags & F_QUOTED)) &&
                    (k + 1 == sd->nt || !(sd->t[k + 1].flags & F_QUOTED));
        if ((f & F_STOP) && !(f & (F_CODE | F_MIXED)) && !alone) ent = 0;
        if (f & F_NUM) ent = 0;
        if (ent) f |= F_ENTITY;
        t->flags = (uint16_t)f;
    }
}

/* ---------------------------------------------------------------------------------------
 * Rules
 * --------------------------------------------------------------------------------------- */

enum {
    R_NUM = 1 << 0,
    R_NEG = 1 << 1,
    R_CONTRAST = 1 << 2,
    R_PREFIX = 1 << 3,
    R_ENTITY = 1 << 4,
    R_SWAP = 1 << 5,
    R_ORDER = 1 << 6,
    R_WH = 1 << 7,
    R_ADD = 1 << 8,
    R_TIME = 1 << 9,
    R_SCOPE = 1 << 10,
    R_OP = 1 << 11,
    R_CODE = 1 << 12,
    R_ALL = 0x1fff,
};

static void say(char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void say(char *why, size_t whylen, const char *fmt, ...)
{
    if (!why || whylen == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
}

/* Whether a word, as written, is in the lexicon's list of `kind`. */
static int is_word(const tok *t, const char *w)
{
    return t->len == strlen(w) && memcmp(t->s, w, t->len) == 0;
}

/* Whether t is one of the n words of list. */
static int one_of(const tok *t, const char *const *list, size_t n)
{
    for (size_t k = 0; k < n; k++)
        if (is_word(t, list[k])) return 1;
    return 0;
}

/* Whether one of sd's words is one of the n words of list. */
static int says_one_of(const side *sd, const char *const *list, size_t n)
{
    for (int i = 0; i < sd->nt; i++)
        if (one_of(&sd->t[i], list, n)) return 1;
    return 0;
}

static int word_is(const tok *t, int kind)
{
    return lex_has(lex_find(t->s, t->len), kind);
}

/* Whether c, not NUL, is one of set's characters. */
static int in_set(char c, const char *set)
{
    return c && strchr(set, c);
}

/* Whether t all but negates: "I barely sweat". */
static int near_negative(const tok *t)
{
    return word_is(t, K_NEARNEG);
}

/* The lexicon's head entry for the base of the irregular verb t is a form of ("wrote":
 * "write"), or t's own entry. */
static int verb_base(const tok *t)
{
    unsigned forms;
    int v = lex_verb(lex_find(t->s, t->len), &forms);
    if (v < 0 || !(forms & ~1u)) return t->lex;
    const char *w = irregular_verbs[v];
    return lex_find(w, strcspn(w, " "));
}

/* Synonyms, also in an irregular verb's other forms: "wrote" and "author" (two forms of
 * one verb are tok_like()'s business). */
static int syn(const tok *a, const tok *b)
{
    int x = verb_base(a), y = verb_base(b);
    return (a->lex >= 0 && b->lex >= 0 && lex_share(a->lex, b->lex, K_SYN)) ||
           (x >= 0 && y >= 0 && x != y && lex_share(x, y, K_SYN));
}

/* Orders two words so that the first is not the longer one. */
static void shorter_first(const char **a, size_t *al, const char **b, size_t *bl)
{
    if (*al <= *bl) return;
    const char *t = *a;
    size_t tl = *al;
    *a = *b, *al = *bl;
    *b = t, *bl = tl;
}

/* ---------------------------------------------------------------------------------------
 * Known words (gw_guard_known_words()): an open-addressed set over one buffer of the words,
 * each NUL-terminated; read-only once loaded.
 * --------------------------------------------------------------------------------------- */

static struct {
    char *buf;      /* the words, each NUL-terminated */
    size_t used, cap, words;
    uint32_t *slot; /* offset into buf + 1; 0 empty */
    size_t mask;
    int loaded;
} known;

int gw_guard_known_words(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open %s", path);
        return -1;
    }
    char line[256];
    size_t used = known.used, words = known.words, cap = known.cap;
    char *buf = known.buf;
    int nomem = 0;
    while (!nomem && fgets(line, sizeof line, f)) {
        size_t n = strcspn(line, "\r\n"), k = 0;
        if (!line[n] && !feof(f)) { /* a line longer than the buffer: none of it */
            int c;
            while ((c = fgetc(f)) != EOF && c != '\n')
                ;
            continue;
        }
        while (k < n && line[k] >= 'a' && line[k] <= 'z')
            k++;
        if (n < 2 || k != n || n > 63) continue;
        if (used + n + 1 > cap) {
            size_t ncap = cap ? cap * 2 : 1 << 16;
            char *nb = ncap < UINT32_MAX ? realloc(buf, ncap) : NULL;
            if (!nb) {
                nomem = 1;
                break;
            }
            buf = nb, cap = ncap;
        }
        memcpy(buf + used, line, n);
        buf[used + n] = 0;
        used += n + 1;
        words++;
    }
    int bad = ferror(f);
    fclose(f);
    known.buf = buf, known.cap = cap; /* (the buffer grown; the words counted only below) */
    size_t slots = 1;
    while (slots < words * 2)
        slots <<= 1;
    uint32_t *slot = nomem || bad || words == known.words ? NULL : calloc(slots, sizeof *slot);
    if (!slot) {
        const char *what = bad ? "read error" : words == known.words ? "no words" : "out of memory";
        snprintf(err, errlen, "%s: %s", path, what);
        return -1;
    }
    for (size_t at = 0, len; at < used; at += len + 1) {
        len = strlen(buf + at);
        size_t h = hash_bytes(buf + at, len) & (slots - 1);
        while (slot[h])
            h = (h + 1) & (slots - 1);
        slot[h] = (uint32_t)at + 1;
    }
    free(known.slot);
    known.used = used, known.words = words;
    known.slot = slot;
    known.mask = slots - 1;
    known.loaded = 1;
    return 0;
}

/* Whether w[0, n) (lower case) is a known word. */
static int known_word(const char *w, size_t n)
{
    if (!known.loaded) return 0;
    for (size_t h = hash_bytes(w, n) & known.mask; known.slot[h]; h = (h + 1) & known.mask) {
        const char *k = known.buf + known.slot[h] - 1;
        if (!strncmp(k, w, n) && k[n] == 0) return 1;
    }
    return 0;
}

/* Whether a and b are one slip apart: a letter left out or added, one changed (sub: 1 when
 * that is to count), or two neighbours swapped. */
static int one_slip(const char *a, size_t al, const char *b, size_t bl, int sub)
{
    shorter_first(&a, &al, &b, &bl);
    if (bl - al > 1) return 0;
    size_t i = 0;
    while (i < al && a[i] == b[i])
        i++;
    if (i == al) return bl == al + 1;
    if (al != bl) return !memcmp(a + i, b + i + 1, al - i); /* one left out */
    if (i + 1 < al && a[i] == b[i + 1] && a[i + 1] == b[i] &&
        !memcmp(a + i + 2, b + i + 2, al - i - 2))
        return 1;
    return sub && !memcmp(a + i + 1, b + i + 1, al - i - 1);
}

/* Whether a and b, a slip apart, are both known words ("complement" and "compliment",
 * "stationary" and "stationery"), and not one in two spellings ("travelled", "traveled"). */
static int two_words(const tok *a, const tok *b)
{
    if (!known.loaded || !known_word(a->s, a->len) || !known_word(b->s, b->len)) return 0;
    const char *x = a->s, *y = b->s;
    size_t xl = a->len, yl = b->len;
    shorter_first(&x, &xl, &y, &yl);
    size_t i = 0;
    while (i < xl && x[i] == y[i])
        i++;
    return !(yl == xl + 1 && i > 0 && y[i] == 'l' && y[i - 1] == 'l' &&
             !memcmp(x + i, y + i + 1, xl - i));
}

/* Whether one of two words is a misspelling of the other: it is no known word (nor one of
 * the lexicon's), written in lower case, and one slip from the other, which begins with the
 * same letter, in words of four letters or more ("chnage", "barkng", "reciept"); where
 * neither is a known word, a letter changed is no slip ("amylase", "amylose"). Only with a
 * list of known words. */
static int misspelt(const tok *a, const tok *b)
{
    /* (the slip first, without lookups: most pairs of words tok_like() meets are none) */
    if (!known.loaded || a->len < 4 || b->len < 4 || a->s[0] != b->s[0] ||
        !one_slip(a->s, a->len, b->s, b->len, 1))
        return 0;
    const unsigned bar = F_NUM | F_CAP | F_ACRO | F_MIXED | F_CODE | F_QUOTED | F_ENTITY;
    for (const tok *t = a; t; t = t == a ? b : NULL)
        for (size_t k = 0; k < t->len; k++)
            if (t->s[k] < 'a' || t->s[k] > 'z') return 0;
    int ka = a->lex >= 0 || known_word(a->s, a->len), kb = b->lex >= 0 || known_word(b->s, b->len);
    if (ka && kb) return 0;
    /* (the slip in lower case; where neither is known, both: "fetchdta" is no "fetchData") */
    if (((ka ? b : a)->flags & bar) || (!ka && !kb && ((a->flags | b->flags) & bar))) return 0;
    return ka || kb || one_slip(a->s, a->len, b->s, b->len, 0);
}

/* exercise/exercising, install/installation, run/running: one word, two forms. */
static int same_root(const char *a, size_t al, const char *b, size_t bl)
{
    shorter_first(&a, &al, &b, &bl);
    size_t cp = 0;
    while (cp < al && a[cp] == b[cp])
        cp++;
    if (al < 3) return cp == al && al == bl;
    if (cp == al) return 1; /* a is a prefix of b: list/listing, commit/committed */
    if (cp + 1 == al && (a[al - 1] == 'e' || a[al - 1] == 'y'))
        return cp >= 3; /* make/making, happy/happiness */
    return cp >= 5 && cp + 2 >= al;
}

/* employer/employee, trainer/trainee: the one who does and the one it is done to. */
static int doer_and_done_to(const tok *a, const tok *b)
{
    for (int r = 0; r < 2; r++) {
        const tok *x = r ? b : a, *y = r ? a : b;
        if (x->nlen > 4 && y->nlen > 4 && !memcmp(x->n + x->nlen - 2, "ee", 2) &&
            (!memcmp(y->n + y->nlen - 2, "er", 2) || !memcmp(y->n + y->nlen - 2, "or", 2)))
            return 1;
    }
    return 0;
}

static int in_law(const tok *t)
{
    return t->nlen > 5 && !memcmp(t->n + t->nlen - 5, "inlaw", 5);
}

/* One spelling of one word: British and American (organise, organize; travelled,
 * traveled), or a slip of one letter in a long word (symtoms, sneezeing, diffrence): one
 * letter more, fewer, other or two swapped, not the first, in words of 7 letters or more
 * (the last two swapped in a word of 6 too: lenght). */
static int spelled_alike(const char *a, size_t al, const char *b, size_t bl)
{
    shorter_first(&a, &al, &b, &bl);
    if (al < 6 || bl - al > 1 || a[0] != b[0]) return 0;
    size_t i = 0;
    while (i < al && a[i] == b[i])
        i++;
    if (i == al) return bl == al + 1 && bl >= 8; /* one more at the end */
    if (al == bl) {
        /* organise, organize */
        if (((a[i] == 's' && b[i] == 'z') || (a[i] == 'z' && b[i] == 's')) &&
            (a[i - 1] == 'i' || a[i - 1] == 'y') && !memcmp(a + i + 1, b + i + 1, al - i - 1))
            return 1;
        /* two swapped; in six letters, the last two only (lenght: not causal/casual,
         * angles/angels, barley/barely) */
        if (i + 1 < al && a[i] == b[i + 1] && a[i + 1] == b[i] &&
            !memcmp(a + i + 2, b + i + 2, al - i - 2))
            return al >= 7 || i + 2 == al;
        if (al < 7) return 0;
        return !memcmp(a + i + 1, b + i + 1, al - i - 1); /* one other letter */
    }
    /* travelled, traveled: the doubled l; else one letter more in a long word */
    if (b[i] == 'l' && i > 0 && b[i - 1] == 'l' && !memcmp(a + i, b + i + 1, al - i)) return 1;
    return bl >= 8 && !memcmp(a + i, b + i + 1, al - i);
}

/* Whether y is the doer of verb v[0, n): v and "er" or "or" ("writer": "write" and "r"),
 * the last consonant doubled first ("winner"). */
static int doer_of(const char *v, size_t n, const tok *y)
{
    const char *w = y->n;
    size_t wl = y->nlen;
    if (wl <= n || memcmp(w, v, n)) return 0;
    const char *rest = w + n;
    size_t rl = wl - n;
    if (v[n - 1] == 'e') return rl == 1 && rest[0] == 'r';
    if (rl == 3 && rest[0] == v[n - 1]) rest++, rl--; /* win, winner */
    return rl == 2 && (!memcmp(rest, "er", 2) || !memcmp(rest, "or", 2));
}

static int tok_like(const tok *a, const tok *b)
{
    if (tok_eq(a, b) || syn(a, b)) return 1;
    /* listed opposites share a root often (employer, employee): they are not one word */
    if ((a->lex >= 0 && b->lex >= 0 && lex_share(a->lex, b->lex, K_CONTRAST)) ||
        doer_and_done_to(a, b))
        return 0;
    unsigned fa, fb;
    int va = lex_verb(lex_find(a->s, a->len), &fa);
    if (va >= 0 && va == lex_verb(lex_find(b->s, b->len), &fb)) {
        /* wrote, written; but a participle alone is also an adjective ("drunk", "frozen
         * fish", "a broken zipper"): it is alike only to the past */
        const unsigned past = 1u << 3, part = 1u << 4;
        int pa = (fa & part) && !(fa & past), pb = (fb & part) && !(fb & past);
        if ((pa && !(fb & (past | part))) || (pb && !(fa & (past | part)))) return 0;
        return 1;
    }
    /* "won" and "winner", "wrote" and "writer": a past's base and its doer (a participle
     * alone stays apart, as above) */
    for (int r = 0; r < 2; r++) {
        const tok *x = r ? b : a, *y = r ? a : b;
        unsigned fx, fy;
        int e = verb_base(x);
        if (lex_verb(lex_find(x->s, x->len), &fx) >= 0 && (fx & (1u << 3)) && e >= 0 &&
            lex_verb(lex_find(y->s, y->len), &fy) < 0 && doer_of(lex[e].w, lex[e].len, y))
            return 1;
    }
    if (a->num >= 0 && b->num >= 0) return 0; /* numbers are the number rule's business */
    if (in_law(a) != in_law(b)) return 0;      /* a brother-in-law is not a brother */
    if (misspelt(a, b)) return 1;
    if ((a->flags | b->flags) & (F_CAP | F_ENTITY | F_ACRO)) { /* Austria is not Australia */
        const tok *x = a->nlen <= b->nlen ? a : b, *y = x == a ? b : a;
        /* Austria and Austrian; not a word of phrasing a name begins ("use", "useState") */
        return x->nlen >= 3 && !(x->flags & F_STOP) && !memcmp(x->n, y->n, x->nlen);
    }
    return same_root(a->n, a->nlen, b->n, b->nlen) ||
           (spelled_alike(a->s, a->len, b->s, b->len) && !two_words(a, b));
}

static int side_has(const side *sd, const tok *x)
{
    for (int i = 0; i < sd->nt; i++)
        if (tok_eq(&sd->t[i], x)) return 1;
    return 0;
}

static int side_has_like(const side *sd, const tok *x)
{
    for (int i = 0; i < sd->nt; i++)
        if (tok_like(&sd->t[i], x)) return 1;
    return 0;
}

static int num_in(const side *sd, const char *k)
{
    for (int i = 0; i < sd->nnum; i++)
        if (strcmp(sd->nums[i], k) == 0) return 1;
    return 0;
}

/* The content word right after the first token holding number k ("8 sheet"), or NULL. */
static const tok *after_number(const side *sd, int k)
{
    for (int i = 0; i + 1 < sd->nt; i++)
        if (sd->t[i].num == k) {
            const tok *t = &sd->t[i], *n = &sd->t[i + 1];
            /* a number with its letter, glued or bracketed, has its word in it: "401k" and
             * "401(k)" (not a number word: "five") */
            for (size_t c = 0; is_digit((unsigned char)t->s[0]) && c < t->len; c++)
                if (isalpha((unsigned char)t->s[c])) return NULL;
            return (n->flags & (F_STOP | F_NUM)) || n->len == 1 ? NULL : n;
        }
    return NULL;
}

/* A number word that counts: "one", "twenty", "a dozen"; not "first", not a numeral. */
static int cardinal(const tok *t)
{
    int g = lex_num(lex_find(t->s, t->len));
    for (int i = 0; g >= 0 && strcmp(num_words[i].w, "first") != 0; i++)
        if (i == g) return 1;
    return 0;
}

/* The word after a number written in digits, an acronym among them ("100 US dollars"), or
 * NULL. */
static const tok *unit_of_number(const side *sd, int k)
{
    for (int i = 0; i + 1 < sd->nt; i++)
        if (sd->t[i].num == k) {
            if (!is_digit((unsigned char)sd->t[i].s[0]) && !cardinal(&sd->t[i]))
                return NULL; /* not "World War II end", "the second world" */
            const tok *n = &sd->t[i + 1];
            /* "100 US dollars": the noun an acronym qualifies; "30 degrees Celsius": the scale */
            if ((n->flags & F_ACRO || is_word(n, "degrees") || is_word(n, "degree")) &&
                i + 2 < sd->nt && !(sd->t[i + 2].flags & (F_STOP | F_NUM)))
                n = &sd->t[i + 2];
            return (n->flags & F_NUM) || ((n->flags & F_STOP) && !(n->flags & F_ACRO)) ? NULL : n;
        }
    return NULL;
}

static int side_has_like(const side *sd, const tok *x);

/* The index in b of a's number k, the same occurrence of its value ("5 kg ... 5 lb": the
 * second 5 is the second), or -1. */
static int num_index(const side *a, int k, const side *b)
{
    int seen = 0;
    for (int i = 0; i < k; i++)
        seen += strcmp(a->nums[i], a->nums[k]) == 0;
    for (int i = 0; i < b->nnum; i++)
        if (strcmp(b->nums[i], a->nums[k]) == 0 && seen-- == 0) return i;
    return -1;
}

/* Whether sd's tokens i and i + 1 are two numbers written with a sign whose order counts
 * between them ("10-3", "2 - 1", "16:9", "10/3", "3–1", a list's "5, 9"): not "5x3" nor
 * "2+2". */
static int ordered_pair(const side *sd, int i, int commas)
{
    const tok *x = &sd->t[i], *y = &sd->t[i + 1];
    if (x->num < 0 || y->num < 0 || x->num == y->num || !(x->flags & F_NUM) ||
        !(y->flags & F_NUM) || !x->raw || !y->raw || !mine(sd, x) || !mine(sd, y) ||
        y->raw < x->raw + x->rawlen)
        return 0;
    const char *c = x->raw + x->rawlen, *end = y->raw;
    int signs = 0;
    for (; c < end; c++) {
        if (*c == ' ')
            continue;
        if (*c == '-' || *c == '/' || *c == ':' || (*c == ',' && commas)) /* (a list's too) */
            signs++;
        else if (end - c >= 3 && !memcmp(c, "\xe2\x80\x93", 3)) /* an en dash */
            signs++, c += 2;
        else
            return 0;
    }
    return signs == 1;
}

/* Whether sd asks something of numbers that their order does not change: a sum, an average,
 * a greatest or least, a common divisor, a sort. */
static int any_order(const side *sd)
{
    static const char *const w[] = {"sum", "total", "add", "plus", "average", "mean",
                                    "median", "gcd", "lcm", "gcf", "common", "max", "maximum",
                                    "min", "minimum", "largest", "smallest", "biggest",
                                    "highest", "lowest", "product", "multiply", "sort",
                                    "sorted", "range", "mode"};
    return SAYS_ONE_OF(sd, w);
}

/* Whether sd has numbers x then y so written. */
static int has_ordered(const side *sd, const char *x, const char *y, int commas)
{
    for (int i = 0; i + 1 < sd->nt; i++)
        if (ordered_pair(sd, i, commas) && !strcmp(sd->nums[sd->t[i].num], x) &&
            !strcmp(sd->nums[sd->t[i + 1].num], y))
            return 1;
    return 0;
}

/* The same numbers in another order, tied to other words: "a 4 by 8 sheet for a 3 by 5
 * table" is not "a 3 by 5 sheet for a 4 by 8 table". A number that keeps its word ("in
 * 2020, who won the 100m sprint", "10 minus 5" and "5 from 10") is a sentence reordered. */
static int number_order(const side *a, const side *b, char *why, size_t whylen)
{
    int ia = 0, ib = 0;
    /* "what is 10-3" vs "what is 3-10", a score of 2-1 vs 1-2; a list's order, but where
     * what is asked of it does not care ("the average of 5, 9, 4") */
    const int commas = !any_order(a) && !any_order(b);
    for (int i = 0; i + 1 < a->nt; i++) {
        if (!ordered_pair(a, i, commas)) continue;
        const char *x = a->nums[a->t[i].num], *y = a->nums[a->t[i + 1].num];
        if (strcmp(x, y) && has_ordered(b, y, x, commas) && !has_ordered(b, x, y, commas)) {
            say(why, whylen, "numbers in another order: %s-%s vs %s-%s", x, y, y, x);
            return 0;
        }
    }
    /* "how many dollars is 100 euros" vs "how many euros is 100 US dollars": one number,
     * the units traded */
    for (int k = 0; k < a->nnum; k++) {
        int kb = num_index(a, k, b);
        const tok *x = unit_of_number(a, k), *y = kb >= 0 ? unit_of_number(b, kb) : NULL;
        if (!x || !y || tok_like(x, y) || !side_has_like(a, y) || !side_has_like(b, x)) continue;
        say(why, whylen, "numbers in another order: %s %.*s vs %s %.*s", a->nums[k],
            (int)x->len, x->s, a->nums[k], (int)y->len, y->s);
        return 0;
    }
    for (;;) {
        while (ia < a->nnum && a->numweak[ia])
            ia++;
        while (ib < b->nnum && b->numweak[ib])
            ib++;
        if (ia == a->nnum || ib == b->nnum) return 1; /* one is shorter: the sets agreed */
        if (strcmp(a->nums[ia], b->nums[ib])) break;
        ia++, ib++;
    }
    for (int k = 0; k < a->nnum; k++) {
        int kb = num_index(a, k, b);
        const tok *x = after_number(a, k), *y = kb >= 0 ? after_number(b, kb) : NULL;
        if (!x || !y || tok_like(x, y)) continue;
        say(why, whylen, "numbers in another order: %s %.*s vs %s %.*s", a->nums[k],
            (int)x->len, x->s, a->nums[k], (int)y->len, y->s);
        return 0;
    }
    return 1;
}

/* How often a side says number k, weak ones ("one" alone) aside. */
static int num_count(const side *sd, const char *k)
{
    int c = 0;
    for (int i = 0; i < sd->nnum; i++)
        c += !sd->numweak[i] && !strcmp(sd->nums[i], k);
    return c;
}

/* "merge two dictionaries in Python 2" vs "... in Python": a number said twice on one side
 * and once on the other is one number fewer. */
static int numbers_counted(const side *a, const side *b, char *why, size_t whylen)
{
    for (int i = 0; i < a->nnum; i++) {
        int ca = num_count(a, a->nums[i]), cb = num_count(b, a->nums[i]);
        if (ca != cb && (ca > 1 || cb > 1)) {
            say(why, whylen, "numbers differ: %s %d times vs %d", a->nums[i], ca, cb);
            return 0;
        }
    }
    return 1;
}

/* The letters of a word that holds digits: "200°c" -> "°c", "a4" -> "a"; 0 for a word
 * without digits ("two"). */
static size_t marks_of(const tok *t, char *out, size_t cap)
{
    size_t n = 0, digits = 0;
    for (size_t i = 0; i < t->len && n + 1 < cap; i++)
        if (is_digit((unsigned char)t->s[i]))
            digits++;
        else if (t->s[i] != '.' && t->s[i] != ',')
            out[n++] = t->s[i];
    return digits ? n : 0;
}

/* "200°C" vs "200°F", "3pm" vs "3am", "Audi A4" vs "Audi S4": the same number marked
 * otherwise in a word of its own on both sides. */
static int numbers_marked(const side *a, const side *b, char *why, size_t whylen)
{
    for (int i = 0; i < a->nt; i++) {
        const tok *x = &a->t[i];
        char mx[NUM_LEN], my[NUM_LEN];
        size_t nx;
        if (x->num < 0 || !(nx = marks_of(x, mx, sizeof mx)) || ordinal(x)) continue;
        int same = 0, other = -1;
        for (int j = 0; j < b->nt && !same; j++) {
            const tok *y = &b->t[j];
            size_t ny;
            if (y->num < 0 || strcmp(a->nums[x->num], b->nums[y->num]) ||
                !(ny = marks_of(y, my, sizeof my)) || ordinal(y))
                continue;
            if (nx == ny && !memcmp(mx, my, nx))
                same = 1;
            else
                other = j;
        }
        if (!same && other >= 0) {
            say(why, whylen, "numbers differ: %.*s vs %.*s", (int)x->len, x->s,
                (int)b->t[other].len, b->t[other].s);
            return 0;
        }
    }
    return 1;
}

/* How number k stands in sd: 1 as a count ("5 rows"), 2 as an ordinal ("the 5th"), 3 both;
 * a number after a word is a label, neither ("World War 2", "chapter 3", "Henry VIII"). */
static int num_ordinal(const side *sd, const char *k)
{
    int how = 0;
    for (int i = 0; i < sd->nnum; i++) {
        if (strcmp(sd->nums[i], k))
            continue;
        int ord = 0, first = -1;
        for (int j = 0; j < sd->nt; j++)
            if (sd->t[j].num == i && (sd->t[j].flags & F_NUM)) {
                ord |= ordinal(&sd->t[j]);
                first = first < 0 ? j : first;
            }
        if (!ord && first > 0 && !(sd->t[first - 1].flags & (F_STOP | F_NUM)))
            continue;
        how |= ord ? 2 : 1;
    }
    return how;
}

/* "the 5 highest salaries" and "the 5th highest salary": a count on one side, a rank on the
 * other (not 1, which speaks of one thing as often as of the first, nor a fraction) */
static int numbers_ranked(const side *a, const side *b, char *why, size_t whylen)
{
    for (int i = 0; i < a->nnum; i++) {
        const char *k = a->nums[i];
        if (a->numweak[i] || !strcmp(k, "1") || strchr(k, '/'))
            continue;
        int x = num_ordinal(a, k), y = num_ordinal(b, k);
        if ((x == 1 && y == 2) || (x == 2 && y == 1)) {
            say(why, whylen, "numbers differ: %s as a %s vs as a %s", k,
                x == 2 ? "rank" : "count", y == 2 ? "rank" : "count");
            return 0;
        }
    }
    return 1;
}

static int rule_numbers(const side *a, const side *b, char *why, size_t whylen)
{
    const char *xa = NULL, *xb = NULL;
    for (int i = 0; i < a->nnum && !xa; i++)
        if (!num_in(b, a->nums[i]) && !(a->numweak[i] && b->nnum == 0)) xa = a->nums[i];
    for (int i = 0; i < b->nnum && !xb; i++)
        if (!num_in(a, b->nums[i]) && !(b->numweak[i] && a->nnum == 0)) xb = b->nums[i];
    if (!xa && !xb) return numbers_counted(a, b, why, whylen) &&
                           numbers_marked(a, b, why, whylen) && number_order(a, b, why, whylen) &&
                           numbers_ranked(a, b, why, whylen);
    say(why, whylen, "numbers differ: %s vs %s", xa ? xa : "none", xb ? xb : "none");
    return 0;
}

/* "JavaScript" and "java script" */
static int joined_in(const tok *x, const side *sd)
{
    for (int i = 0; i + 1 < sd->nt; i++) {
        size_t k = 0;
        for (int j = i; j < sd->nt && j < i + 3 && k < x->nlen; j++) {
            const tok *u = &sd->t[j];
            if (k + u->len > x->nlen || memcmp(x->n + k, u->s, u->len) != 0) break;
            k += u->len;
            if (k == x->nlen && j > i) return 1;
        }
    }
    return 0;
}

/* 1 when a negator stands just before token j: "not safe". */
static int negated_at(const side *sd, int j)
{
    for (int k = j - 1; k >= 0 && k >= j - 2; k--)
        if (sd->t[k].flags & F_NEG) return 1;
    return 0;
}

/* Whether sd has x or a synonym of it ("kilograms" for "kg"). */
static int side_has_syn(const side *sd, const tok *x)
{
    for (int i = 0; i < sd->nt; i++)
        if (tok_eq(&sd->t[i], x) || syn(&sd->t[i], x)) return 1;
    return 0;
}

/* "in California", "in 2024": a place's or a time's "in", no opposite of "out" */
static int place_in(const side *sd, int i)
{
    return is_word(&sd->t[i], "in") && i + 1 < sd->nt &&
           (sd->t[i + 1].flags & (F_ENTITY | F_CAP | F_NUM));
}

/* Whether sd's token i is the unit of an age: "a 7 year old", "a 3-month-old". */
static int age_unit(const side *sd, int i)
{
    return i > 0 && (sd->t[i - 1].flags & F_NUM) && i + 1 < sd->nt &&
           is_word(&sd->t[i + 1], "old");
}

static int rule_contrast(const side *a, const side *b, char *why, size_t whylen)
{
    for (int i = 0; i < a->nt; i++) {
        const tok *x = &a->t[i];
        /* "not good" vs "bad" is left to the negation rule; "won't turn on" vs "won't turn
         * off", both negated, are still opposites */
        if (x->lex < 0 || !lex_has(x->lex, K_CONTRAST) || side_has_syn(b, x) ||
            joined_in(x, b) || place_in(a, i))
            continue;
        int nx = negated_at(a, i);
        for (int j = 0; j < b->nt; j++) {
            const tok *y = &b->t[j];
            if (y->lex < 0 || !lex_has(y->lex, K_CONTRAST) || tok_eq(x, y) || syn(x, y) ||
                negated_at(b, j) != nx || joined_in(y, a) || place_in(b, j))
                continue;
            if (!lex_share(x->lex, y->lex, K_CONTRAST) || side_has_syn(a, y)) continue;
            /* an age is no duration asked: "sleep for a 7 year old" and "hours of sleep" */
            if (age_unit(a, i) != age_unit(b, j)) continue;
            say(why, whylen, "opposites: %.*s vs %.*s", (int)x->len, x->s, (int)y->len, y->s);
            return 0;
        }
    }
    return 1;
}

/* 1 when w is base plus an inflection: installing/install, enabled/enable. */
static int inflected(const char *w, size_t wl, const char *base, size_t bl)
{
    static const char *const sufs[] = {"s",   "es",    "ed",     "d",    "ing",  "er",
                                       "ers", "ation", "ations", "ment", "ments"};
    if (bl < 3 || wl <= bl) return 0;
    size_t cut = bl;
    if (memcmp(w, base, bl) != 0) {
        /* enable -> enabling: the e goes */
        if (base[bl - 1] != 'e' || memcmp(w, base, bl - 1) != 0) return 0;
        cut = bl - 1;
    }
    for (size_t k = 0; k < sizeof sufs / sizeof *sufs; k++)
        if (wl - cut == strlen(sufs[k]) && memcmp(w + cut, sufs[k], wl - cut) == 0) return 1;
    return 0;
}

/* un-/dis-/in-/non-/de- and -ful/-less: a word and its negation. */
static int negated_form(const tok *x, const tok *y)
{
    static const struct {
        const char *p;
        size_t min;       /* shortest root */
        const char *next; /* letters the root must start with, NULL any */
    } pre[] = {{"un", 3, NULL}, {"non", 3, NULL}, {"dis", 4, NULL},
               {"de", 5, NULL}, {"in", 5, NULL},  {"im", 5, "bmp"},
               {"il", 5, "l"},  {"ir", 5, "r"},   {"anti", 4, NULL}};
    for (size_t k = 0; k < sizeof pre / sizeof *pre; k++) {
        size_t pl = strlen(pre[k].p);
        if (x->nlen < pl + pre[k].min || memcmp(x->n, pre[k].p, pl) != 0) continue;
        const char *r = x->n + pl;
        size_t rl = x->nlen - pl;
        if (pre[k].next && !strchr(pre[k].next, r[0])) continue;
        if ((rl == y->nlen && memcmp(r, y->n, rl) == 0) ||
            (rl == y->len && memcmp(r, y->s, rl) == 0) || inflected(r, rl, y->n, y->nlen) ||
            inflected(y->n, y->nlen, r, rl))
            return 1;
    }
    if (x->nlen > 5 && y->nlen > 5 && memcmp(x->n + x->nlen - 4, "less", 4) == 0 &&
        memcmp(y->n + y->nlen - 3, "ful", 3) == 0 && x->nlen - 4 == y->nlen - 3 &&
        memcmp(x->n, y->n, x->nlen - 4) == 0)
        return 1;
    return 0;
}

/* "crustless" is without a crust: x is y's root and -less. */
static int without_root(const tok *x, const tok *y)
{
    if (x->len < 7 || memcmp(x->s + x->len - 4, "less", 4)) return 0;
    size_t rl = x->len - 4;
    return (y->nlen == rl && !memcmp(y->n, x->s, rl)) || (y->len == rl && !memcmp(y->s, x->s, rl));
}

/* "not safe" on one side and "unsafe" on the other say the same thing. */
static int negation_spelled(const side *p, int i, const side *q)
{
    if (near_negative(&p->t[i])) return 0; /* (all but negates: no "unsafe" for it) */
    for (int j = i + 1; j < p->nt && j <= i + 2; j++) {
        const tok *r = &p->t[j];
        if ((r->flags & F_NUM) ||
            ((r->flags & F_STOP) && (r->lex < 0 || !lex_has(r->lex, K_CONTRAST))))
            continue;
        for (int k = 0; k < q->nt; k++) {
            const tok *x = &q->t[k];
            if (negated_form(x, r) || without_root(x, r)) return 1;
            /* "not blank" and "non-empty": the negated root a synonym */
            if (x->nlen > 5 && !memcmp(x->n, "non", 3) && r->lex >= 0) {
                int e = lex_find(x->n + 3, x->nlen - 3);
                if (e >= 0 && lex_share(e, r->lex, K_SYN)) return 1;
            }
            /* "without eggs" and "egg-free" */
            if (k + 1 < q->nt && is_word(&q->t[k + 1], "free") && tok_like(x, r)) return 1;
            /* "not good" and "bad" */
            if (x->lex >= 0 && r->lex >= 0 && !tok_eq(x, r) && !syn(x, r) &&
                lex_share(x->lex, r->lex, K_CONTRAST))
                return 1;
        }
        return 0;
    }
    return 0;
}

/* Whether a side says to stop or keep from doing something ("get my dog to quit barking"):
 * the other way to spell "stop my dog from barking". */
static int stops_doing(const side *sd)
{
    for (int k = 0; k < sd->nt; k++)
        if (sd->t[k].lex >= 0 && lex_has(sd->t[k].lex, K_CEASE)) return 1;
    return 0;
}

static int rule_negation(const side *a, const side *b, char *why, size_t whylen)
{
    int na = 0, nb = 0, fa = 0, fb = 0; /* negators, and of them those that wholly negate */
    for (int i = 0; i < a->nt; i++)
        na += !!(a->t[i].flags & F_NEG), fa += (a->t[i].flags & F_NEG) && !near_negative(&a->t[i]);
    for (int i = 0; i < b->nt; i++)
        nb += !!(b->t[i].flags & F_NEG), fb += (b->t[i].flags & F_NEG) && !near_negative(&b->t[i]);
    /* "it rarely snows" is not "it never snows" */
    if (na && nb && (fa == 0) != (fb == 0)) {
        say(why, whylen, "negation differs: all but vs wholly");
        return 0;
    }
    if ((na > 0) == (nb > 0)) return 1;
    const side *p = na ? a : b, *q = na ? b : a;
    int plain = 0;
    for (int i = 0; i < p->nt; i++)
        if ((p->t[i].flags & F_NEG) && !negation_spelled(p, i, q) &&
            !((is_from(&p->t[i]) || word_is(&p->t[i], K_CEASE)) && stops_doing(q)) &&
            !(is_word(&p->t[i], "free") && side_has(q, &p->t[i]))) /* "is shipping free"
                                                                    * and "free shipping" */
            plain++;
    if (!plain) return 1;
    say(why, whylen, "negation in %s only", na ? "stored" : "query");
    return 0;
}

static int rule_prefix(const side *a, const side *b, char *why, size_t whylen)
{
    /* "a crustless pie" vs "a pie with a crust"; "a pie without a crust" agrees */
    for (int pass = 0; pass < 2; pass++) {
        const side *p = pass ? b : a, *q = pass ? a : b;
        for (int i = 0; i < p->nt; i++)
            for (int j = 0; j < q->nt; j++)
                if (without_root(&p->t[i], &q->t[j]) && !negated_at(q, j)) {
                    say(why, whylen, "opposites: %.*s vs %.*s", (int)p->t[i].len, p->t[i].s,
                        (int)q->t[j].len, q->t[j].s);
                    return 0;
                }
    }
    for (int pass = 0; pass < 2; pass++) {
        const side *p = pass ? b : a, *q = pass ? a : b;
        for (int i = 0; i < p->nt; i++) {
            const tok *x = &p->t[i];
            /* (nor when the other side says it otherwise: "uninstall a program" and "remove
             * an installed app") */
            if ((x->flags & (F_STOP | F_NUM)) || side_has(q, x) || side_has_syn(q, x)) continue;
            for (int j = 0; j < q->nt; j++) {
                const tok *y = &q->t[j];
                if ((y->flags & (F_STOP | F_NUM)) || side_has(p, y) || !negated_form(x, y) ||
                    negated_at(q, j))
                    continue;
                say(why, whylen, "opposites: %.*s vs %.*s", (int)x->len, x->s, (int)y->len, y->s);
                return 0;
            }
        }
    }
    return 1;
}

/* "NASA" and "National Aeronautics and Space Administration" */
/* Whether t, a word inside a name the other side abbreviates, may be passed over:
 * "Bank of America", "Department of the Interior" */
static int acronym_glue(const tok *t)
{
    return (t->flags & F_STOP) && (is_word(t, "of") || is_word(t, "and") ||
                                   is_word(t, "the") || is_word(t, "for"));
}

static int acronym_of(const tok *x, const side *sd)
{
    if (!(x->flags & F_ACRO) || x->len < 2 || x->len > 8) return 0;
    for (int i = 0; i < sd->nt; i++) {
        size_t k = 0;
        for (int j = i; j < sd->nt && k < x->len; j++) {
            const tok *u = &sd->t[j];
            if (k > 0 && acronym_glue(u)) continue;
            if (u->s[0] != x->s[k]) break;
            k++;
        }
        if (k == x->len) return 1;
    }
    return 0;
}

static int entity_found(const tok *x, const side *sd)
{
    for (int i = 0; i < sd->nt; i++) {
        const tok *y = &sd->t[i];
        if (tok_eq(x, y) || syn(x, y)) return 1;
        if (y->len == x->len && memcmp(y->s, x->s, x->len) == 0) return 1;
        /* "Mac OS" and "macOS": a piece of the other side's compound */
        if (x->len >= 2 && y->len > x->len && !(x->flags & F_QUOTED) &&
            (memcmp(y->s, x->s, x->len) == 0 || memcmp(y->s + y->len - x->len, x->s, x->len) == 0))
            return 1;
        /* Mac and macOS; but C and C++ are two languages */
        if (x->nlen >= 3 && y->nlen >= 3 && same_root(x->n, x->nlen, y->n, y->nlen)) return 1;
    }
    return acronym_of(x, sd) || joined_in(x, sd);
}

/* Names that one side gives and the other leaves to be understood or spells out: "an HTTP
 * GET request" is "a GET request", "the oceans on Earth" are "the oceans", "a pandas
 * DataFrame" is what pandas reads into, C# is "C sharp". (Two sides that name two of a kind
 * still differ: HTTP vs HTTPS.) */
static int implied_name(const tok *x, const side *other)
{
    if (is_word(x, "http") || is_word(x, "earth") || is_word(x, "dataframe"))
        return 1;
    /* C# spelled "C sharp" (the C of which the other side's C# implies), MS for Microsoft */
    for (int j = 0; j < other->nt; j++) {
        const tok *y = &other->t[j];
        if ((is_word(x, "c#") || is_word(x, "f#")) && j > 0 && is_word(y, "sharp") &&
            other->t[j - 1].len == 1 && other->t[j - 1].s[0] == x->s[0])
            return 1;
        if ((x->len == 1 && y->len == 2 && y->s[0] == x->s[0] && y->s[1] == '#') ||
            (is_word(x, "ms") && is_word(y, "microsoft")))
            return 1;
    }
    /* the language a library the other side names is of: "pandas" is Python's, "npm"
     * JavaScript's; the system a tool is of: "kubectl" is Kubernetes'; the maker of a
     * program: "MS Word" is Microsoft's */
    static const struct {
        const char *lang, *libs;
    } of[] = {{"python", " pandas numpy pip django flask matplotlib scipy pytest "},
              {"javascript", " npm react nodejs node.js jquery typescript "},
              {"js", " npm react nodejs node.js jquery "},
              {"kubernetes", " kubectl minikube configmap crashloopbackoff kubelet helm "},
              {"ios", " iphone ipad "},
              {"microsoft", " ms word excel powerpoint outlook onedrive "}};
    for (size_t k = 0; k < sizeof of / sizeof *of; k++) {
        if (!is_word(x, of[k].lang))
            continue;
        for (int j = 0; j < other->nt; j++) {
            char w[40];
            const tok *y = &other->t[j];
            if ((size_t)y->len + 3 > sizeof w)
                continue;
            snprintf(w, sizeof w, " %.*s ", (int)y->len, y->s);
            if (strstr(of[k].libs, w))
                return 1;
        }
    }
    return 0;
}

/* A maker's or body's name, which may stand before its product's or event's: "Google
 * Chrome", "the FIFA World Cup". (Not a place's or a person's first name: "New Mexico" is not
 * Mexico, nor "Michelle Obama" Obama.) */
static int maker(const tok *x)
{
    static const char *const makers[] = {
        "google", "microsoft", "apple", "amazon", "meta", "facebook", "adobe", "mozilla",
        "oracle", "ibm", "samsung", "sony", "nintendo", "valve", "fifa", "uefa", "nba", "nfl",
        "mlb", "nhl", "ieee", "iso", "windows", "netflix", "spotify", "github", "docker",
        "net", "honda", "toyota", "ford", "bmw", "tesla", "nissan", "hyundai", "kia",
        "volkswagen", "audi", "mercedes", "chevrolet", "subaru", "mazda", "dell", "lenovo"};
    return ONE_OF(x, makers);
}

/* Whether rest (what a longer name adds to a shorter one) makes a word of the same name:
 * a plural, a people or a language ("Korea", "Korean"), a version's digits ("Python3"). */
static int name_ending(const char *rest, size_t n)
{
    static const char *const ends[] = {"s",   "es",  "n",    "ns", "an", "ans", "ian",
                                       "ians", "ean", "vian", "nian", "ic", "ese", "lese",
                                       "ish",  "i",   "is",   "'s"};
    size_t d = 0;
    while (d < n && isdigit((unsigned char)rest[d]))
        d++;
    if (d == n) return 1;
    for (size_t k = 0; k < sizeof ends / sizeof *ends; k++)
        if (strlen(ends[k]) == n && !memcmp(rest, ends[k], n)) return 1;
    return 0;
}

/* Whether x names a country: a word of COUNTRIES' group of the lexicon (a lookup, not a
 * scan of the list). */
static int is_country(const tok *x)
{
    int e = lex_find(x->s, x->len);
    return e >= 0 && lex_share(e, lex_find("france", 6), K_CONTRAST);
}

/* Whether the country sd names at i is a city or a state of that name: "Mexico City", "the
 * state of Georgia" (not "the capital city of France", "the state of India's economy"). */
static int country_as_city(const side *sd, int i)
{
    const tok *t = sd->t;
    return (i + 1 < sd->nt && is_word(&t[i + 1], "city")) ||
           (i >= 3 && is_word(&t[i - 1], "of") && is_word(&t[i - 2], "state") &&
            is_word(&t[i - 3], "the") && t[i].raw && t[i].rawlen == t[i].len);
}

/* "the capital of India" vs "of Indiana", "Peru" vs "Perugia", "China" vs "Chinatown": a
 * country's name the other side's begins with, and letters that make another name (not a
 * people or a language: "Korean"; "Mac OS" and "macOS" write one name, as products'
 * names often do: "Postgres" and "PostgreSQL"); a country's name for its city or a state
 * on one side only ("Mexico City", "the state of Georgia"); an acronym, as written, that
 * another begins ("EBIT" vs "EBITDA"). */
static int rule_longer_name(const side *a, const side *b, char *why, size_t whylen)
{
    for (int pass = 0; pass < 2; pass++) {
        const side *p = pass ? b : a, *q = pass ? a : b;
        for (int i = 0; i < p->nt; i++) {
            const tok *x = &p->t[i];
            /* an acronym another begins: EBIT, EBITDA; HTTP, HTTPS */
            for (int j = 0; (x->flags & F_ACRO) && j < q->nt; j++) {
                const tok *y = &q->t[j];
                if (!(y->flags & F_ACRO) || y->len < x->len + 2 || memcmp(y->s, x->s, x->len) ||
                    side_has(q, x) || side_has(p, y) || !mine(p, x) || !mine(q, y))
                    continue;
                say(why, whylen, "names differ: %.*s vs %.*s", (int)x->len, x->s, (int)y->len,
                    y->s);
                return 0;
            }
            if (x->len < 3 || (x->flags & F_QUOTED) || !is_country(x)) continue;
            if (country_as_city(p, i)) /* "Mexico City" vs "Mexico" */
                for (int j = 0; j < q->nt; j++)
                    if (tok_eq(x, &q->t[j]) && !country_as_city(q, j)) {
                        say(why, whylen, "names differ: the city or state of %.*s",
                            (int)x->len, x->s);
                        return 0;
                    }
            if (side_has(q, x)) continue;
            for (int j = 0; j < q->nt; j++) {
                const tok *y = &q->t[j];
                if (y->len < x->len + 2 || memcmp(y->s, x->s, x->len) || side_has(p, y) ||
                    name_ending(y->s + x->len, y->len - x->len))
                    continue;
                int joined = 0; /* the rest is a word of p's: "Mac OS" */
                for (int k = 0; k < p->nt && !joined; k++)
                    joined = p->t[k].len == y->len - x->len &&
                             !memcmp(p->t[k].s, y->s + x->len, p->t[k].len);
                if (joined) continue;
                say(why, whylen, "names differ: %.*s vs %.*s", (int)x->len, x->s, (int)y->len,
                    y->s);
                return 0;
            }
        }
    }
    return 1;
}

/* Whether sd writes t with a capital where no sentence starts: a name ("in Turkey"). */
static int capital_inside(const side *sd, const tok *t)
{
    /* (F_CAP: not in Title Case text; mine(): a token read from the other side, an
     * abbreviation's words, lies in that side's text) */
    if (!t->raw || !(t->flags & F_CAP) || !mine(sd, t) || !isupper((unsigned char)t->raw[0]) ||
        t->raw <= sd->text)
        return 0;
    const char *c = t->raw;
    while (c > sd->text && (c[-1] == ' ' || c[-1] == '\t'))
        c--;
    return c > sd->text && !strchr(".!?\n:\"'(", c[-1]);
}

/* "how to cook a turkey" vs "how to cook in Turkey", "clean my china" vs "clean in China",
 * "what is a java" vs "what is Java": a word after an article or a possessive in lower case
 * is a thing; the same word in capitals, without one, a name. */
static int rule_name_or_thing(const side *a, const side *b, char *why, size_t whylen)
{
    static const char dets[] = " a an my your our his her their this that these those some ";
    for (int pass = 0; pass < 2; pass++) {
        const side *p = pass ? b : a, *q = pass ? a : b;
        for (int i = 1; i < p->nt; i++) {
            const tok *x = &p->t[i], *d = &p->t[i - 1];
            char w[16];
            /* the noun the phrase is of: last, or before a preposition ("a python list"
             * is a list) */
            if (!x->raw || !islower((unsigned char)x->raw[0]) || d->len >= 8) continue;
            if (i + 1 < p->nt) {
                snprintf(w, sizeof w, " %.*s ", (int)(p->t[i + 1].len < 8 ? p->t[i + 1].len : 8),
                         p->t[i + 1].s);
                if (!strstr(" in on at for with to from into and or ", w)) continue;
            }
            snprintf(w, sizeof w, " %.*s ", (int)d->len, d->s);
            if (!strstr(dets, w)) continue;
            for (int j = 0; j < q->nt; j++) {
                const tok *y = &q->t[j];
                /* a name after a preposition or "is" ("in Turkey", "what is Java"); not
                 * one of a name's words ("Mother's Day"), an acronym ("my PC") or a type
                 * ("parse String into int") */
                if (!tok_eq(x, y) || !capital_inside(q, y) || y->rawlen != x->rawlen ||
                    y->rawlen < 2 || !islower((unsigned char)y->raw[1]) || j == 0 ||
                    (j + 1 < q->nt && q->t[j + 1].raw &&
                     isupper((unsigned char)q->t[j + 1].raw[0])))
                    continue;
                snprintf(w, sizeof w, " %.*s ", (int)(q->t[j - 1].len < 8 ? q->t[j - 1].len : 8),
                         q->t[j - 1].s);
                if (!strstr(" in to from at for about is of near visit visiting ", w)) continue;
                say(why, whylen, "a thing vs a name: %.*s", (int)x->len, x->s);
                return 0;
            }
        }
    }
    return 1;
}

/* The part of a dotted name after its last dot ("json.dumps": "dumps"), or NULL. */
static const char *member(const tok *t, size_t *len)
{
    if (!(t->flags & F_CODE)) return NULL;
    const char *dot = NULL;
    for (size_t i = 1; i + 1 < t->len; i++)
        if (t->s[i] == '.' && isalpha((unsigned char)t->s[i + 1])) dot = t->s + i;
    if (!dot) return NULL;
    *len = (size_t)(t->s + t->len - dot - 1);
    return dot + 1;
}

/* Whether sd has a token spelled as t is, letter for letter (a plural's -s too). */
static int written_as(const side *sd, const tok *t)
{
    for (int k = 0; k < sd->nt; k++)
        if (sd->t[k].len == t->len && !memcmp(sd->t[k].s, t->s, t->len)) return 1;
    return 0;
}

/* "json.dumps" vs "json.dump", "Promise.all" vs "Promise.allSettled": two members of one
 * module or object, two functions, whatever their spelling shares. */
static int rule_members(const side *a, const side *b, char *why, size_t whylen)
{
    for (int i = 0; i < a->nt; i++) {
        size_t ml, nl;
        const char *m = member(&a->t[i], &ml);
        if (!m) continue;
        size_t head = (size_t)(m - a->t[i].s);
        for (int j = 0; j < b->nt; j++) {
            const char *n = member(&b->t[j], &nl);
            if (!n || (size_t)(n - b->t[j].s) != head || memcmp(a->t[i].s, b->t[j].s, head) ||
                (ml == nl && !memcmp(m, n, ml)) || written_as(b, &a->t[i]) ||
                written_as(a, &b->t[j]))
                continue;
            say(why, whylen, "another member: %.*s vs %.*s", (int)a->t[i].len, a->t[i].s,
                (int)b->t[j].len, b->t[j].s);
            return 0;
        }
    }
    return 1;
}

/* Whether p's name at i is a maker's or body's name before a name q gives without it:
 * "Google Chrome" and "clear chrome's cache", "the FIFA World Cup" and "the World Cup"; not
 * where q has a name of its own before it ("Google Maps" and "Apple Maps"). (A person's
 * first name is no such part: "Michelle Obama" is not "Obama".) */
static int name_first_part(const side *p, int i, const side *q)
{
    const tok *x = &p->t[i];
    if (i + 1 >= p->nt || !(p->t[i + 1].flags & F_ENTITY) || (x->flags & F_QUOTED) ||
        !maker(x))
        return 0;
    const tok *y = &p->t[i + 1];
    int j = 0;
    while (j < q->nt && !tok_eq(y, &q->t[j]))
        j++;
    if (j == q->nt) return 0;
    const tok *before = j > 0 ? &q->t[j - 1] : NULL;
    return !before || (before->flags & (F_STOP | F_NUM)) ||
           (!(before->flags & (F_ENTITY | F_CAP | F_ACRO)) && before->lex < 0 && !maker(before));
}

static int rule_entities(const side *a, const side *b, char *why, size_t whylen)
{
    for (int pass = 0; pass < 2; pass++) {
        const side *p = pass ? b : a, *q = pass ? a : b;
        for (int i = 0; i < p->nt; i++) {
            const tok *x = &p->t[i];
            if (!(x->flags & F_ENTITY) || entity_found(x, q) || implied_name(x, q)) continue;
            /* "sqrt(144)": an operation's name, which rule_operation() compares */
            if (lex_has(lex_find(x->s, x->len), K_MATHOP)) continue;
            /* "the Nile" and "the Nile River" */
            if (word_is(x, K_PLACE) &&
                ((i > 0 && (p->t[i - 1].flags & F_ENTITY) && entity_found(&p->t[i - 1], q)) ||
                 (i + 1 < p->nt && (p->t[i + 1].flags & F_ENTITY) &&
                  entity_found(&p->t[i + 1], q))))
                continue;
            /* a word of a name that the other side abbreviates: "United Nations" vs "UN" */
            int spelled = 0;
            for (int j = 0; j < q->nt && !spelled; j++) {
                const tok *acr = &q->t[j];
                spelled = (acr->flags & F_ACRO) && memchr(acr->s, x->s[0], acr->len) &&
                          acronym_of(acr, p);
            }
            if (spelled) continue;
            if (name_first_part(p, i, q)) continue;
            say(why, whylen, "%s \"%.*s\" only in %s", (x->flags & F_QUOTED) ? "quoted" : "name",
                (int)x->len, x->s, pass ? "query" : "stored");
            return 0;
        }
    }
    return 1;
}

/* Index of the nearest content word from i going by step (skipping function words), at
 * most 3 words away; -1. */
static int content_near(const side *sd, int i, int step)
{
    for (int k = 1, j = i + step; k <= 3 && j >= 0 && j < sd->nt; k++, j += step) {
        const tok *t = &sd->t[j];
        if (t->flags & F_DIR) return -1;
        if (!(t->flags & F_STOP)) return j;
    }
    return -1;
}

/* The first word after sd->t[i] that is not an article or a possessive; -1 at a
 * preposition or a number. */
static int next_word(const side *sd, int i)
{
    for (int j = i + 1; j < sd->nt; j++) {
        const tok *t = &sd->t[j];
        if (t->flags & F_DROP) continue;
        return (t->flags & (F_DIR | F_NUM)) ? -1 : j;
    }
    return -1;
}

static int find_before(const side *sd, const tok *x, int end)
{
    for (int i = 0; i < end; i++)
        if (tok_eq(&sd->t[i], x) || syn(&sd->t[i], x)) return i; /* "int" for "integer" */
    return -1;
}

/* The indexes of sd's words but articles and possessives, into idx; their count. */
static int kept_words(const side *sd, int *idx)
{
    int n = 0;
    for (int i = 0; i < sd->nt; i++)
        if (!(sd->t[i].flags & F_DROP)) idx[n++] = i;
    return n;
}

/* Whether a's words from ia[i] on are like b's from ib[j] on, n of them, one not a stop word. */
static int span_like(const side *a, const int *ia, int i, const side *b, const int *ib, int j,
                     int n)
{
    int content = 0;
    for (int k = 0; k < n; k++) {
        if (!tok_like(&a->t[ia[i + k]], &b->t[ib[j + k]])) return 0;
        content += !(a->t[ia[i + k]].flags & F_STOP);
    }
    return content > 0;
}

/* Names of several words trading places around the rest: "did Joe Frazier beat Muhammad
 * Ali" vs "did Muhammad Ali beat Joe Frazier", a's X M Y against b's Y M X (articles and
 * possessives left out), M holding a word that is not "and", "or", "vs". */
static int traded_spans(const side *a, const side *b, char *why, size_t whylen)
{
    int ia[MAX_TOK], ib[MAX_TOK], na = kept_words(a, ia), nb = kept_words(b, ib);
    if (na != nb) return 1;
    int p = 0, q = na - 1;
    while (p < na && tok_like(&a->t[ia[p]], &b->t[ib[p]]))
        p++;
    while (q > p && tok_like(&a->t[ia[q]], &b->t[ib[q]]))
        q--;
    /* (the words after the trade may differ too: "soda for powder in pancakes" and
     * "powder for soda in cookies") */
    for (int e = q; e >= p + 2; e--) {
        int len = e - p + 1;
        for (int lx = 1; lx <= 3 && lx < len; lx++)
            for (int ly = 1; ly <= 3 && lx + ly < len; ly++) {
                int lm = len - lx - ly, others = 0;
                if (!span_like(a, ia, p, b, ib, e + 1 - lx, lx) ||
                    !span_like(a, ia, e + 1 - ly, b, ib, p, ly))
                    continue;
                for (int k = 0; k < lm; k++) {
                    const tok *m = &a->t[ia[p + lx + k]];
                    if (!tok_like(m, &b->t[ib[p + ly + k]])) {
                        others = -1;
                        break;
                    }
                    if (!word_is(m, K_JOIN)) others++;
                }
                if (others <= 0) continue;
                const tok *x = &a->t[ia[p]], *y = &a->t[ia[e + 1 - ly]];
                say(why, whylen, "order reversed: %.*s ... %.*s", (int)x->len, x->s, (int)y->len,
                    y->s);
                return 0;
            }
    }
    return 1;
}

/* Whether sd's token i is written with a possessive 's before the next token: "mother's
 * brother". */
static int owns(const side *sd, int i)
{
    const tok *x = &sd->t[i];
    if (i + 1 >= sd->nt || !x->raw || !mine(sd, x) || x->rawlen < 3) return 0;
    const char *e = x->raw + x->rawlen; /* (the word as written, its 's in it) */
    if (e[-1] != 's' && e[-1] != 'S') return 0;
    return e[-2] == '\'' || (x->rawlen >= 5 && !memcmp(e - 4, "\xe2\x80\x99", 3));
}

/* "substitute baking soda for baking powder" vs "substitute baking powder for baking
 * soda", "did Federer beat Nadal" vs "did Nadal beat Federer": the same words, two of them
 * trading places. */
static int rule_traded(const side *a, const side *b, char *why, size_t whylen)
{
    int ia[MAX_TOK], ib[MAX_TOK], na = kept_words(a, ia), nb = kept_words(b, ib), d[2], nd = 0;
    if (na != nb) return 1;
    for (int k = 0; k < na; k++)
        if (!tok_like(&a->t[ia[k]], &b->t[ib[k]])) {
            if (nd < 2) d[nd] = k;
            nd++;
        }
    if (nd != 2) return 1;
    /* neighbours ("eggs raw", "yesterday's match") and the two sides of "x and y", "x or
     * y", "x vs y" read the same either way */
    /* ... but "a square a rectangle", with an article between, are not neighbours */
    /* ... but a noun after both says which of them it belongs to: "my cat dog food" */
    int joined = ia[d[1]] == ia[d[0]] + 1, joins = 0, others = 0;
    for (int k = d[0] + 1; k < d[1]; k++)
        word_is(&a->t[ia[k]], K_JOIN) ? joins++ : others++;
    int owner = joined && d[1] + 1 < na && !(a->t[ia[d[1] + 1]].flags & (F_STOP | F_NUM)) &&
                ia[d[1] + 1] == ia[d[1]] + 1 && ib[d[1] + 1] == ib[d[1]] + 1;
    /* ... and an owner and what it owns on both sides, in either order: "my mother's
     * brother" vs "my brother's mother" */
    if (joined && owns(a, ia[d[0]]) && owns(b, ib[d[0]])) owner = 1;
    if ((joined && !owner) || (joins && !others)) return 1;
    const tok *x = &a->t[ia[d[0]]], *y = &a->t[ia[d[1]]];
    if ((x->flags & F_STOP) || (y->flags & F_STOP) || !tok_like(x, &b->t[ib[d[1]]]) ||
        !tok_like(y, &b->t[ib[d[0]]]))
        return 1;
    say(why, whylen, "order reversed: %.*s ... %.*s", (int)x->len, x->s, (int)y->len, y->s);
    return 0;
}

/* 1 for "from", 2 for a word that goes towards ("to", "into"), 0 otherwise. */
static int direction(const tok *t)
{
    if (!(t->flags & F_DIR)) return 0;
    if (is_word(t, "from")) return 1;
    return is_word(t, "to") || is_word(t, "into") || is_word(t, "onto") ||
                   is_word(t, "towards") || is_word(t, "toward")
               ? 2
               : 0;
}

/* "how to convert": a "to" after a question word leads a verb, not a destination. */
static int infinitive_to(const side *sd, int i)
{
    return i > 0 && is_word(&sd->t[i], "to") &&
           ((sd->t[i - 1].flags & F_WH) || is_word(&sd->t[i - 1], "how") ||
            is_word(&sd->t[i - 1], "what") || is_word(&sd->t[i - 1], "where"));
}

/* "a list to a tuple" and "a tuple into a list" say one direction. */
static int same_direction(const tok *x, const tok *y)
{
    return tok_eq(x, y) || ((is_word(x, "to") || is_word(x, "into")) &&
                            (is_word(y, "to") || is_word(y, "into")));
}

/* Whether sd also says "to x" (dir toward x, x read as rule_order() reads it): then a's
 * "to x" is in b whatever b's other "to"s say ("the best way to respond to the greatest
 * weakness" against itself). */
static int says_toward(const side *sd, const tok *dir, const tok *x, int v)
{
    for (int k = 0; k < sd->nt; k++) {
        if (!(sd->t[k].flags & F_DIR) || !same_direction(&sd->t[k], dir) || infinitive_to(sd, k))
            continue;
        int r = v ? next_word(sd, k) : content_near(sd, k, +1);
        if (r >= 0 && tok_eq(&sd->t[r], x)) return 1;
    }
    return 0;
}

/* Whether sd asks to convert a thing into another. */
static int converts(const side *sd)
{
    static const char *const w[] = {"convert", "conversion", "cast", "transform", "parse"};
    return SAYS_ONE_OF(sd, w);
}

/* Whether a word joins sd's tokens between i and j (either first): "to who or to whom" names
 * two choices, in either order the same question. */
static int joined(const side *sd, int i, int j)
{
    for (int k = (i < j ? i : j) + 1; k < (i < j ? j : i); k++)
        if (word_is(&sd->t[k], K_JOIN)) return 1;
    return 0;
}

/* "x to y" here and "y to x" there: what follows the directional word on each side comes
 * before it on the other. Also "a stronger than b" vs "b stronger than a". */
static int rule_order(const side *a, const side *b, char *why, size_t whylen)
{
    if (!rule_traded(a, b, why, whylen)) return 0;
    /* "into Spanish" and "from Spanish": the same word, reached the other way */
    for (int i = 0; i < a->nt; i++) {
        int da = direction(&a->t[i]), r = da ? content_near(a, i, +1) : -1;
        if (r < 0 || r != i + 1) continue;
        for (int k = 0; k + 1 < b->nt; k++) {
            int db = direction(&b->t[k]);
            if (db && db != da && tok_eq(&b->t[k + 1], &a->t[r]) && !side_has(b, &a->t[i]) &&
                !side_has(a, &b->t[k])) {
                say(why, whylen, "direction differs: %.*s %.*s vs %.*s %.*s", (int)a->t[i].len,
                    a->t[i].s, (int)a->t[r].len, a->t[r].s, (int)b->t[k].len, b->t[k].s,
                    (int)b->t[k + 1].len, b->t[k + 1].s);
                return 0;
            }
        }
    }
    /* the word after "to": the next content word, or the next word at all ("a list to a
     * string", where "list" is a word of request phrasing elsewhere) */
    for (int v = 0; v < 2; v++)
        for (int i = 0; i < a->nt; i++) {
            if (!(a->t[i].flags & F_DIR) || infinitive_to(a, i)) continue;
            int r = v ? next_word(a, i) : content_near(a, i, +1);
            if (r < 0 || says_toward(b, &a->t[i], &a->t[r], v)) continue;
            for (int k = 0; k < b->nt; k++) {
                if (!(b->t[k].flags & F_DIR) || !same_direction(&b->t[k], &a->t[i]) ||
                    infinitive_to(b, k))
                    continue;
                int rb = v ? next_word(b, k) : content_near(b, k, +1);
                if (rb < 0 || tok_eq(&a->t[r], &b->t[rb])) continue;
                int x = find_before(a, &b->t[rb], i), y = find_before(b, &a->t[r], k);
                if (x < 0 || (y >= 0 && joined(a, x, i) && joined(b, y, k))) continue;
                /* in a conversion, b's end a's start where a's end is not in b nor b's start
                 * in a: "convert a JSON string to an object" vs "a dict to a JSON string"
                 * (not "a date string to a datetime" vs "a string to a date") */
                int sb = content_near(b, k, -1);
                if (y < 0 && !side_has(b, &a->t[r]) && sb >= 0 && !side_has_like(a, &b->t[sb]) &&
                    converts(a) && converts(b)) {
                    say(why, whylen, "direction differs: %.*s %.*s %.*s vs %.*s %.*s",
                        (int)a->t[x].len, a->t[x].s, (int)a->t[i].len, a->t[i].s,
                        (int)a->t[r].len, a->t[r].s, (int)b->t[k].len, b->t[k].s,
                        (int)b->t[rb].len, b->t[rb].s);
                    return 0;
                }
                if (y < 0) continue;
                say(why, whylen, "order reversed: %.*s %.*s %.*s vs %.*s %.*s %.*s",
                    (int)a->t[x].len, a->t[x].s, (int)a->t[i].len, a->t[i].s, (int)a->t[r].len,
                    a->t[r].s, (int)b->t[y].len, b->t[y].s, (int)b->t[k].len, b->t[k].s,
                    (int)b->t[rb].len, b->t[rb].s);
                return 0;
            }
        }
    return traded_spans(a, b, why, whylen);
}

/* "When was it built?" vs "Where was it built?": questions that open on different
 * question words ask for different things. What, which and how open paraphrases of
 * everything ("What year" = "when", "What causes" = "why") and are left alone. */

/* Whether a question that opens on "how" asks something else than b's opening question
 * word: "how was penicillin discovered" is not "who discovered it", nor "how do I use it"
 * "when should I use it". "How" and "why" often ask one thing ("how come", "how do
 * rainbows form"), as do "how" and "where" ("how do I find my IP address", "where can I
 * see it"), and "how long ago" or "how old" may ask "when". 0 when a does not open on
 * "how". */
static int how_differs(const side *a, const side *b)
{
    if (!a->nt || !b->nt || !is_word(&a->t[0], "how")) return 0;
    const tok *y = &b->t[0];
    /* an amount ("how many live there"), a way ("how can I use it") or reasons to do it
     * ("why should I use it") is not what "why" asks ("why do so many live there"), but
     * "how do I get hiccups" may be "why do I get hiccups" */
    if (is_word(y, "why") && a->nt > 2 && b->nt > 1 &&
        (word_is(&a->t[1], K_HOWQTY) || is_word(&a->t[1], "can") ||
         is_word(&a->t[1], "should") || is_word(&b->t[1], "should") ||
         is_word(&b->t[1], "would")))
        return 1;
    if (is_word(y, "why") || is_word(y, "where") || is_word(y, "how") || !(y->flags & F_WH))
        return 0;
    if (a->nt > 1 && is_word(y, "when") && word_is(&a->t[1], K_HOWQTY)) return 0;
    return 1;
}

/* What a question opening on "how" and a word of amount asks, with "how soon", "how much
 * time" and "how many hours" asking "how long", "how many times" "how often" and "how many
 * years old" "how old": 1 long, 2 often, 3 old, 0 another amount (its word says which). */
static int how_asks(const side *sd)
{
    static const char *const units[] = {"time", "hour", "hours", "minute", "minutes", "day",
                                        "days", "week", "weeks", "year", "years", "month",
                                        "months", "second", "seconds", NULL};
    if (is_word(&sd->t[1], "long") || is_word(&sd->t[1], "soon")) return 1;
    if (is_word(&sd->t[1], "often")) return 2;
    if (is_word(&sd->t[1], "old")) return 3;
    if (sd->nt > 3 && is_word(&sd->t[1], "many") && is_word(&sd->t[2], "years") &&
        is_word(&sd->t[3], "old"))
        return 3; /* "how many years old" */
    if (sd->nt < 3 || (!is_word(&sd->t[1], "much") && !is_word(&sd->t[1], "many"))) return 0;
    if (is_word(&sd->t[1], "many") && is_word(&sd->t[2], "times")) return 2;
    for (int i = 0; units[i]; i++)
        if (is_word(&sd->t[2], units[i])) return 1;
    return 0;
}

/* Whether "how x" and "how y" both ask for an amount or a measure, one that could be another
 * (an amount of money is how big a fund is: "much" and "many" are no measure's opposite). */
static int how_measures(const tok *x, const tok *y)
{
    int dx = word_is(x, K_HOWDIM), dy = word_is(y, K_HOWDIM);
    int ax = is_word(x, "much") || is_word(x, "many");
    int ay = is_word(y, "much") || is_word(y, "many");
    if ((dx && ay) || (dy && ax)) return 0;
    return (dx || word_is(x, K_HOWQTY)) && (dy || word_is(y, K_HOWQTY));
}

static int is_do(const tok *t)
{
    return is_word(t, "do") || is_word(t, "does") || is_word(t, "did");
}

/* How a question asks for a person or thing, its words at ix[0, n) (articles left out): 1
 * of the one who acts ("who killed Caesar", "what eats owls"), 2 of the one acted on ("who
 * did Caesar kill", "what do owls eat"), 0 neither. */
static int wh_role(const side *sd, const int *ix, int n)
{
    if (n < 3) return 0;
    const tok *w = &sd->t[ix[0]], *t1 = &sd->t[ix[1]], *t2 = &sd->t[ix[2]];
    int who = is_word(w, "who") || is_word(w, "whom");
    if (!who && !is_word(w, "what") && !is_word(w, "which")) return 0;
    if (is_do(t1)) return 2;
    if (t1->flags & F_STOP) return 0;
    if (who) return 1;
    if (is_do(t2)) return 2; /* "which animals do rabbits eat" */
    return (t2->flags & F_STOP) ? 0 : 1;
}

/* Every content word of p but its word at skip (-1: none) is like one of q. */
static int words_within_but(const side *p, const side *q, int skip)
{
    for (int i = 0; i < p->nt; i++) {
        const tok *t = &p->t[i];
        if (i != skip && !(t->flags & (F_STOP | F_NUM | F_NEG)) && !side_has_like(q, t))
            return 0;
    }
    return 1;
}

/* Every content word of p is like one of q. */
static int words_within(const side *p, const side *q)
{
    return words_within_but(p, q, -1);
}

static int asked(const side *sd);

static int rule_wh(const side *a, const side *b, char *why, size_t whylen)
{
    const tok *x = a->nt ? &a->t[0] : NULL, *y = b->nt ? &b->t[0] : NULL;
    /* "how do I cook salmon" vs "how long do I cook salmon": a way against an amount */
    if (x && y && is_word(x, "how") && is_word(y, "how") && a->nt > 1 && b->nt > 1 &&
        word_is(&a->t[1], K_HOWQTY) != word_is(&b->t[1], K_HOWQTY)) {
        const side *q = word_is(&a->t[1], K_HOWQTY) ? a : b, *o = q == a ? b : a;
        if (o->t[1].flags & F_STOP) {
            say(why, whylen, "question differs: how vs how %.*s", (int)q->t[1].len, q->t[1].s);
            return 0;
        }
    }
    /* the same words, the roles turned: "who killed Caesar" vs "who did Caesar kill" */
    int ia[MAX_TOK], ib[MAX_TOK], na = kept_words(a, ia), nb = kept_words(b, ib);
    int ra = wh_role(a, ia, na), rb = wh_role(b, ib, nb);
    /* (the kind a "what" asks of is no word the other must say: "what animals eat mice"
     * vs "what do mice eat") */
    int ka = ra == 1 && !is_word(&a->t[ia[0]], "who") && !(a->t[ia[2]].flags & F_STOP) ? ia[1]
                                                                                        : -1;
    int kb = rb == 1 && !is_word(&b->t[ib[0]], "who") && !(b->t[ib[2]].flags & F_STOP) ? ib[1]
                                                                                        : -1;
    if (ra && rb && ra != rb && words_within_but(a, b, ka) && words_within_but(b, a, kb)) {
        say(why, whylen, "roles differ: who acts vs who is acted on");
        return 0;
    }
    /* both asking of the verb that follows ("how long does it take", "how wide is it"), not
     * of a noun ("how much sleep" is "how many hours of sleep") */
    if (x && y && is_word(x, "how") && is_word(y, "how") && a->nt > 2 && b->nt > 2 &&
        how_measures(&a->t[1], &b->t[1]) &&
        ((a->t[2].flags & F_STOP) || how_asks(a)) && ((b->t[2].flags & F_STOP) || how_asks(b)) &&
        !tok_like(&a->t[1], &b->t[1]) && !(how_asks(a) && how_asks(a) == how_asks(b))) {
        say(why, whylen, "question differs: how %.*s vs how %.*s", (int)a->t[1].len,
            a->t[1].s, (int)b->t[1].len, b->t[1].s);
        return 0; /* "how long does it take" and "how much does it cost" */
    }
    /* "how tall is the tower" vs "how many levels does the tower have": a measure of the
     * thing against a count of something else (not of its units: "how many feet tall") */
    for (int pass = 0; x && y && pass < 2; pass++) {
        const side *m = pass ? b : a, *c = pass ? a : b;
        if (m->nt > 2 && c->nt > 2 && is_word(&m->t[0], "how") && is_word(&c->t[0], "how") &&
            (word_is(&m->t[1], K_HOWDIM) || word_is(&m->t[1], K_HOWQTY)) &&
            !is_word(&m->t[1], "many") && !is_word(&m->t[1], "much") &&
            (m->t[2].flags & F_STOP) && is_word(&c->t[1], "many") &&
            !(c->t[2].flags & (F_STOP | F_NUM)) && !how_asks(c) && !word_is(&c->t[2], K_UNIT) &&
            !side_has_like(m, &c->t[2])) {
            say(why, whylen, "question differs: how %.*s vs how many %.*s", (int)m->t[1].len,
                m->t[1].s, (int)c->t[2].len, c->t[2].s);
            return 0;
        }
    }
    if (!x || !y || !(x->flags & F_WH) || !(y->flags & F_WH) || tok_eq(x, y)) return 1;
    if ((is_word(x, "how") && !how_differs(a, b)) || (is_word(y, "how") && !how_differs(b, a)))
        return 1;
    /* "what's the best time to visit" is "when is the best time to visit" */
    if (asked(a) == 'e' && asked(b) == 'e') return 1;
    say(why, whylen, "question differs: %.*s vs %.*s", (int)x->len, x->s, (int)y->len, y->s);
    return 0;
}

/* Whether sd->t[j], after a what, makes it a when: "what year did", "what's the best time
 * to", not "what's the time difference". */
static int asks_a_when(const side *sd, int j)
{
    return word_is(&sd->t[j], K_WHEN) &&
           (j + 1 == sd->nt || (sd->t[j + 1].flags & (F_STOP | F_NUM)));
}

/* What the question word t asks for: a person ('o'), a place ('r') or a time ('e'); 0. */
static int wh_of(const tok *t)
{
    if (is_word(t, "who") || is_word(t, "whom") || is_word(t, "whose")) return 'o';
    if (is_word(t, "where")) return 'r';
    return is_word(t, "when") ? 'e' : 0;
}

/* What a side's first word asks: 'w' what or which, 'r' where, 'e' when, 'o' who, 'y' why,
 * 'h' how; "what year" asks a when, "what place" a where, "what reason" a why, "what way" a
 * how, "how long ago" a when; 0 for none. */
static int asked(const side *sd)
{
    if (!sd->nt) return 0;
    const tok *t = &sd->t[0];
    if (wh_of(t)) return wh_of(t);
    if (is_word(t, "why")) return 'y';
    if (is_word(t, "how"))
        return sd->nt > 2 && is_word(&sd->t[1], "long") && is_word(&sd->t[2], "ago") ? 'e' : 'h';
    if (!is_word(t, "what") && !is_word(t, "which")) return 0;
    /* "which inventor", "what sushi": a choice among things, which any question word may ask */
    if (sd->nt > 1 && !(sd->t[1].flags & (F_STOP | F_NUM))) return 0;
    static const struct {
        const char *w;
        int c;
    } of[] = {{"place", 'r'}, {"location", 'r'}, {"country", 'r'}, {"city", 'r'},
              {"reason", 'y'}, {"way", 'h'}, {"person", 'o'}};
    for (int j = 1; j < sd->nt && j <= 4; j++) { /* "what's the best time to" */
        if (asks_a_when(sd, j)) return 'e';
        for (size_t k = 0; k < sizeof of / sizeof *of && j <= 3; k++)
            if (is_word(&sd->t[j], of[k].w)) return of[k].c;
    }
    return 'w';
}

/* Whether sd asks "what year", "what age" (a when) after other words, from token `from`
 * on, behind a stop word ("in what year", "at what age"); at_end: as its last words. */
static int late_when(const side *sd, int from, int at_end)
{
    for (int j = from > 1 ? from : 1; j + 1 < sd->nt; j++)
        if ((is_word(&sd->t[j], "what") || is_word(&sd->t[j], "which")) &&
            asks_a_when(sd, j + 1) && (sd->t[j - 1].flags & F_STOP) &&
            (!at_end || j + 2 == sd->nt))
            return 1;
    return 0;
}

/* Whether a side asks for a person ('o': who), a place ('r': where) or a time ('e': when,
 * "what year"), by its first words; 0 neither. */
static int answer_kind(const side *sd)
{
    if (!sd->nt) return 0;
    const tok *t = &sd->t[0];
    if (wh_of(t)) return wh_of(t);
    if ((is_word(t, "what") || is_word(t, "which")) && sd->nt > 1 && asks_a_when(sd, 1))
        return 'e';
    /* "The Mona Lisa was painted in what year?": a when asked at the end */
    return !(t->flags & F_WH) && late_when(sd, 1, 1) ? 'e' : 0;
}

/* "What is the Eiffel Tower?" vs "Where is the Eiffel Tower?", "What do lions eat?" vs "How
 * do lions eat?", "Why do cats purr?" vs "How do cats purr?": another question word before
 * the same words (the other side may add up to three). */
static int rule_wh_swap(const side *a, const side *b, char *why, size_t whylen)
{
    /* a person, a place and a time are three answers, whatever the words after: "who wrote
     * it" vs "what year was it published" */
    int ka = answer_kind(a), kb = answer_kind(b);
    if (ka && kb && ka != kb) {
        say(why, whylen, "question differs: %.*s vs %.*s", (int)a->t[0].len, a->t[0].s,
            (int)b->t[0].len, b->t[0].s);
        return 0;
    }
    int x = asked(a), y = asked(b);
    if (!x || !y || x == y) return 1;
    /* "how do I get hiccups" may be "why do I get hiccups"; "how do cats purr" is not "why" */
    const side *hs = x == 'h' ? a : b;
    if (x + y == 'h' + 'y' && hs->nt > 2 &&
        (is_word(&hs->t[2], "i") || is_word(&hs->t[2], "you") || is_word(&hs->t[2], "we")))
        return 1;
    int ia[MAX_TOK], ib[MAX_TOK], na = kept_words(a, ia), nb = kept_words(b, ib);
    const side *p = na <= nb ? a : b, *q = p == a ? b : a;
    const int *ip = p == a ? ia : ib, *iq = p == a ? ib : ia;
    int np = p == a ? na : nb, nq = p == a ? nb : na, j = 1;
    if (np < 3 || nq - np > 3) return 1;
    for (int i = 1; i < np; i++) { /* p's words after the first, in order, within q's */
        while (j < nq && !tok_like(&p->t[ip[i]], &q->t[iq[j]]))
            j++;
        if (j++ >= nq) return 1;
    }
    say(why, whylen, "question differs: %.*s vs %.*s", (int)a->t[0].len, a->t[0].s,
        (int)b->t[0].len, b->t[0].s);
    return 0;
}

/* A content word of the middle that the other side says nowhere, in no form. */
static const tok *unmatched(const side *sd, const int *idx, int from, int to, const side *other)
{
    for (int k = from; k < to; k++) {
        const tok *t = &sd->t[idx[k]];
        if (t->flags & (F_STOP | F_NUM | F_NEG)) continue;
        if (!side_has_like(other, t)) return t;
    }
    return NULL;
}

/* The first auxiliary of a tense (K_PAST, K_NOW) among sd->t[idx[from..to)]; NULL. */
static const tok *tensed(const side *sd, const int *idx, int from, int to, int kind)
{
    for (int k = from; k < to; k++)
        if (word_is(&sd->t[idx[k]], kind)) return &sd->t[idx[k]];
    return NULL;
}

/* x's middle is "when" alone and y's a question word with a unit of time, nothing else:
 * "when did it end" and "what year did it end" ask one thing. */
static int asks_when(const side *x, const int *ix, int xf, int xt, const side *y, const int *iy,
                     int yf, int yt)
{
    if (xt - xf != 1) return 0;
    const tok *w = &x->t[ix[xf]];
    if (w->len != 4 || memcmp(w->s, "when", 4) != 0) return 0;
    int unit = 0;
    for (int k = yf; k < yt; k++) {
        const tok *t = &y->t[iy[k]];
        if (word_is(t, K_WHEN) || singular_is(t, K_WHEN)) /* "what years" */
            unit++;
        else if (!(t->flags & F_STOP) || word_is(t, K_PAST) || word_is(t, K_NOW))
            return 0;
    }
    return unit == 1;
}

/* How many of sd's first words open a question whose rest, a noun phrase, asks it alone:
 * "what is" (the) in "what is the melting point of iron", 0 when other opens a question
 * too (the two openings are then compared as words). */
static int bare_opening(const side *sd, const int *idx, int n, const side *other,
                        const int *oidx, int on)
{
    if (n < 4 || on < 1 || !is_word(&sd->t[idx[0]], "what")) return 0;
    const tok *o = &other->t[oidx[0]];
    if ((o->flags & F_WH) || is_word(o, "what") || is_word(o, "which")) return 0;
    return is_word(&sd->t[idx[1]], "is") || is_word(&sd->t[idx[1]], "are") ? 2 : 0;
}

static int rule_swap(const side *a, const side *b, char *why, size_t whylen)
{
    int ia[MAX_TOK], ib[MAX_TOK], na = kept_words(a, ia), nb = kept_words(b, ib);
    /* "what is the boiling point of iron" and "melting point of iron" differ in one word */
    int oa = bare_opening(a, ia, na, b, ib, nb), ob = bare_opening(b, ib, nb, a, ia, na);
    memmove(ia, ia + oa, (size_t)(na -= oa) * sizeof *ia);
    memmove(ib, ib + ob, (size_t)(nb -= ob) * sizeof *ib);
    int p = 0;
    while (p < na && p < nb && tok_like(&a->t[ia[p]], &b->t[ib[p]]))
        p++;
    int s = 0;
    while (s < na - p && s < nb - p && tok_like(&a->t[ia[na - 1 - s]], &b->t[ib[nb - 1 - s]]))
        s++;
    int ma = na - p - s, mb = nb - p - s;
    /* a swap is short and the sentence around it long enough to be "the same sentence" */
    int ctx = p + s;
    if (ma < 1 || mb < 1 || ma > 2 || mb > 2 || ctx < 1 || ctx < ma || ctx < mb) return 1;
    /* past an opening one side leaves out, only one word for another, not its synonym
     * (a terse query rewords more: "sqrt of 144", "biggest planet") */
    if (oa || ob) {
        const tok *x = &a->t[ia[p]], *y = &b->t[ib[p]];
        const tok *u = x->nlen <= y->nlen ? x : y, *v = u == x ? y : x;
        if (ma != 1 || mb != 1 || syn(x, y) || ((x->flags | y->flags) & F_STOP) ||
            memcmp(u->n, v->n, u->nlen) == 0) /* "fi" and "fiction" */
            return 1;
    }
    /* "web site" vs "website", "e mail" vs "email" */
    char ja[128], jb[128];
    size_t la = 0, lb = 0;
    for (int k = p; k < p + ma; k++) {
        const tok *t = &a->t[ia[k]];
        if (la + t->nlen < sizeof ja) memcpy(ja + la, t->n, t->nlen), la += t->nlen;
    }
    for (int k = p; k < p + mb; k++) {
        const tok *t = &b->t[ib[k]];
        if (lb + t->nlen < sizeof jb) memcpy(jb + lb, t->n, t->nlen), lb += t->nlen;
    }
    if (la == lb && memcmp(ja, jb, la) == 0) return 1;
    if (ma == 1 && mb == 1) {
        const tok *x = &a->t[ia[p]], *y = &b->t[ib[p]];
        if ((x->flags & F_WH) && (y->flags & F_WH)) {
            int howwhy = (x->s[0] == 'h' && y->s[2] == 'y') || (y->s[0] == 'h' && x->s[2] == 'y');
            if (howwhy) return 1;
            say(why, whylen, "question differs: %.*s vs %.*s", (int)x->len, x->s, (int)y->len,
                y->s);
            return 0;
        }
    }
    /* "when" and "what year", "in which century" */
    if (asks_when(a, ia, p, p + ma, b, ib, p, p + mb) ||
        asks_when(b, ib, p, p + mb, a, ia, p, p + ma))
        return 1;
    /* "why do dogs eat grass" and "what's the reason dogs eat grass": the opening is the
     * whole difference, and it asks the same (asked()) */
    if (p == 0 && asked(a) && asked(a) == asked(b) && asked(a) != 'w' && asked(a) != 'h')
        return 1;
    /* "how long did it last" and "how many years did it last": the words after "how" are
     * the whole difference, and they ask one thing (how_asks()) */
    if (ia[p] == 1 && ib[p] == 1 && is_word(&a->t[0], "how") && is_word(&b->t[0], "how") &&
        how_asks(a) && how_asks(a) == how_asks(b))
        return 1;
    /* "who is" vs "who was": the auxiliaries are the whole difference, in two tenses */
    const tok *pa = tensed(a, ia, p, p + ma, K_PAST), *pb = tensed(b, ib, p, p + mb, K_PAST);
    const tok *qa = tensed(a, ia, p, p + ma, K_NOW), *qb = tensed(b, ib, p, p + mb, K_NOW);
    if ((pa && !pb && qb) || (pb && !pa && qa)) {
        const tok *x = pa ? pa : qa, *y = pa ? qb : pb;
        say(why, whylen, "tense differs: %.*s vs %.*s", (int)x->len, x->s, (int)y->len, y->s);
        return 0;
    }
    /* "bad" vs "not good": the negation rule has already judged it */
    for (int k = p; k < p + ma; k++)
        if ((a->t[ia[k]].flags & F_NEG) && !near_negative(&a->t[ia[k]])) return 1;
    for (int k = p; k < p + mb; k++)
        if ((b->t[ib[k]].flags & F_NEG) && !near_negative(&b->t[ib[k]])) return 1;
    /* opposites that both sides also use elsewhere: "turn on dark mode on" vs "turn off" */
    for (int k = p; k < p + ma; k++)
        for (int l = p; l < p + mb; l++) {
            const tok *x = &a->t[ia[k]], *y = &b->t[ib[l]];
            if (x->lex >= 0 && y->lex >= 0 && !tok_eq(x, y) && !syn(x, y) &&
                lex_share(x->lex, y->lex, K_CONTRAST) && !negated_at(a, ia[k]) &&
                !negated_at(b, ib[l])) {
                say(why, whylen, "opposites: %.*s vs %.*s", (int)x->len, x->s, (int)y->len, y->s);
                return 0;
            }
        }
    const tok *x = unmatched(a, ia, p, p + ma, b);
    const tok *y = unmatched(b, ib, p, p + mb, a);
    if (!x && !y) return 1;
    /* name the two words that differ */
    if (!x) x = &a->t[ia[p]];
    if (!y) y = &b->t[ib[p]];
    say(why, whylen, "one word differs: %.*s vs %.*s", (int)x->len, x->s, (int)y->len, y->s);
    return 0;
}

/* Whether q->t[j] joined to its neighbour is a word of p: "e mail" and "email". */
static int glued(const side *q, int j, const side *p)
{
    for (int k = j - 1; k <= j; k++) {
        if (k < 0 || k + 1 >= q->nt) continue;
        const tok *x = &q->t[k], *y = &q->t[k + 1];
        for (int i = 0; i < p->nt; i++) {
            const tok *w = &p->t[i];
            if (w->len == x->len + y->len && memcmp(w->s, x->s, x->len) == 0 &&
                memcmp(w->s + x->len, y->s, y->len) == 0)
                return 1;
        }
    }
    return 0;
}

/* Whether t, a word one side adds, only asks the other's why: "why did the Titanic sink" vs
 * "what caused the Titanic to sink". */
static int why_word(const side *other, const tok *t)
{
    static const char *const w[] = {"cause", "causes", "caused", "causing", "reason", "reasons"};
    if (asked(other) != 'y') return 0;
    for (size_t i = 0; i < sizeof w / sizeof *w; i++)
        if (is_word(t, w[i])) return 1;
    return 0;
}

/* Whether q->t[j] is a content word that p says nowhere, in no form, and that may narrow
 * q's question: adverbs in -ly ("quickly") but those of manner, and the nouns that frame a
 * question ("the reason cats purr", "the word ubiquitous") do not, but for what an answer
 * is measured in ("in one word"). */
/* Whether q's token j is in "in simple terms", "in plain English", "in layman's words": a
 * plain answer asked, as any answer is. */
static int plain_terms(const side *q, int j)
{
    static const char *const adj[] = {"simple", "plain", "layman", "laymans", "easy"};
    static const char *const noun[] = {"terms", "words", "english", "language"};
    for (int k = j - 1; k <= j; k++) {
        if (k < 1 || k + 1 >= q->nt || !is_word(&q->t[k - 1], "in")) continue;
        int a = 0, n = 0;
        for (size_t i = 0; i < sizeof adj / sizeof *adj; i++)
            a |= is_word(&q->t[k], adj[i]);
        for (size_t i = 0; i < sizeof noun / sizeof *noun; i++)
            n |= is_word(&q->t[k + 1], noun[i]);
        if (a && n) return 1;
    }
    return 0;
}

static int added_word(const side *p, const side *q, int j)
{
    const tok *t = &q->t[j];
    if (plain_terms(q, j)) return 0;
    /* (a name implied by the other side's, but not one added beside it: "pip and python") */
    if ((t->flags & (F_STOP | F_NUM | F_NEG)) || side_has_like(p, t) || why_word(p, t) ||
        (implied_name(t, p) &&
         !(j > 0 && (is_word(&q->t[j - 1], "and") || is_word(&q->t[j - 1], "or")))))
        return 0;
    /* "the difference between a will and a trust" is "will vs trust" (also misspelt) */
    if (is_word(t, "difference") || is_word(t, "differences") || is_word(t, "diffrence") ||
        is_word(t, "differnce")) {
        for (int k = 0; k < p->nt; k++)
            if (is_word(&p->t[k], "vs") || is_word(&p->t[k], "versus")) return 0;
    }
    if (t->len > 4 && memcmp(t->s + t->len - 2, "ly", 2) == 0 && !word_is(t, K_LYADJ) &&
        !word_is(t, K_MANNER))
        return 0;
    if (is_word(t, "fast") || is_word(t, "quick")) return 0; /* "quickly" */
    if (word_is(t, K_FRAME) && word_is(t, K_FORMAT)) {
        int k = j - 1;
        while (k >= 0 && (q->t[k].flags & (F_DROP | F_NUM)))
            k--;
        if (k >= 0 && is_word(&q->t[k], "in")) return !glued(q, j, p);
    }
    /* "how long ago" asks "when" */
    if (j > 0 && is_word(&q->t[j - 1], "how") && word_is(t, K_HOWQTY)) return 0;
    /* "Honda Civic" names the "civic" the other side says alone: a maker's name adds no
     * question (rule_entities() says when it is another maker's) */
    if (maker(t) && j + 1 < q->nt && side_has_like(p, &q->t[j + 1])) return 0;
    /* "Lake Baikal" names "Baikal" */
    if (word_is(t, K_PLACE) && ((j > 0 && side_has_like(p, &q->t[j - 1])) ||
                                (j + 1 < q->nt && side_has_like(p, &q->t[j + 1]))))
        return 0;
    return !word_is(t, K_FRAME) && !glued(q, j, p);
}

/* Whether a run of added words q->t[j..e] holds a word of `kind`, in its written or its
 * singular form. */
static int run_has(const side *q, int j, int e, int kind)
{
    for (int k = j; k <= e; k++)
        if (word_is(&q->t[k], kind) || lex_has(lex_find(q->t[k].n, q->t[k].nlen), kind)) return 1;
    return 0;
}

/* The first of q's added words (added_word()) that narrows q's question, or -1. A run of
 * them narrows when it holds a qualifier and opens a noun phrase before a word both sides
 * say ("a vegan lasagna", "the early symptoms"; not "a network switch", "the sky appear
 * blue"), or follows a preposition that narrows ("snacks for kids"), or a weaker one with
 * a qualifier or a group of people ("symptoms in children"; not "in my car"), or reads a
 * time against now ("last year"); or there are three added words or more ("to see the
 * northern lights"). */
static int narrowing(const side *p, const side *q)
{
    int first = -1, count = 0;
    for (int j = 0; j < q->nt; j++) {
        if (!added_word(p, q, j)) continue;
        int e = j;
        while (e + 1 < q->nt && added_word(p, q, e + 1))
            e++;
        count += e - j + 1;
        if (first < 0) first = j;
        const tok *next = e + 1 < q->nt ? &q->t[e + 1] : NULL;
        const tok *prev = j > 0 ? &q->t[j - 1] : NULL;
        int qual = run_has(q, j, e, K_QUAL) || run_has(q, j, e, K_AUDIENCE);
        if (qual && next && !(next->flags & (F_STOP | F_NUM)) && side_has_like(p, next) &&
            (!prev || (prev->flags & F_STOP)))
            return j;
        int k = j - 1; /* the word before, past articles and numbers ("in one sentence") */
        while (k >= 0 && (q->t[k].flags & (F_DROP | F_NUM)))
            k--;
        /* "the history of a single file": one of a kind narrows like a qualifier */
        if (run_has(q, k + 1, j - 1, K_ONE)) qual = 1;
        /* "in one month", "within a week": a time frame narrows what is asked ("learn
         * guitar"), not in a rate question ("how much protein in a day") */
        if (k >= 0 && run_has(q, j, e, K_TIMENOUN) &&
            (is_word(&q->t[k], "in") || is_word(&q->t[k], "within")) &&
            !(q->nt > 1 && is_word(&q->t[0], "how") &&
              (is_word(&q->t[1], "much") || is_word(&q->t[1], "many"))))
            return j;
        /* "at night", "in winter": a time of its own narrows like a qualifier */
        int when = (run_has(q, j, e, K_SETTING) || run_has(q, j, e, K_FORMAT)) && k >= 0 &&
                   !is_word(&q->t[k], "of");
        /* "per day" on an amount is the rate the question implies; "per capita" narrows */
        int rate = k >= 0 && is_word(&q->t[k], "per") && run_has(q, j, e, K_TIMENOUN);
        if (k >= 0 && !rate &&
            (word_is(&q->t[k], K_PREP) || ((qual || when) && word_is(&q->t[k], K_WEAKPREP))))
            return j;
        /* "foods high in iron that vegetarians can eat": a qualifier in a clause of its own */
        if (qual && prev && (is_word(prev, "that") || is_word(prev, "which"))) return j;
        /* "when it launched", "if I am pregnant", "if I got an extension": a clause of its own */
        for (int c = j - 1; c >= 0 && c >= j - 4 && (q->t[c].flags & F_STOP); c--)
            if (word_is(&q->t[c], K_SUBORD)) return j;
        /* "vertically", "alphabetically": a manner the task is done in */
        if (run_has(q, j, e, K_MANNER)) return j;
        /* "open a bank account online", "grow tomatoes indoors": a qualifier at the end,
         * after a word both say */
        if (word_is(&q->t[j], K_TRAIL) && e + 1 == q->nt && e == j && prev &&
            !(prev->flags & F_STOP) && side_has_like(p, prev))
            return j;

        if (run_has(q, j, e, K_DEIXIS) &&
            (run_has(q, j, e, K_TIMENOUN) || (next && word_is(next, K_TIMENOUN))))
            return j;
        j = e;
    }
    return count >= 3 ? first : -1;
}

/* Whether a word names operation g (of math_ops; sqrt names two: square and root). */
static int names_op(const tok *t, int g)
{
    for (int e = lex_find(t->s, t->len); e >= 0; e = lex[e].next)
        if (lex[e].kind == K_MATHOP && lex[e].group == g) return 1;
    return 0;
}

/* Counts of each operation a side names: 0 when it names none. */
static int math_ops_of(const side *sd, uint8_t *count)
{
    int any = 0;
    memset(count, 0, sizeof math_ops / sizeof *math_ops);
    for (int i = 0; i < sd->nt; i++)
        for (int e = lex_find(sd->t[i].s, sd->t[i].len); e >= 0; e = lex[e].next)
            if (lex[e].kind == K_MATHOP && count[lex[e].group] < 255)
                count[lex[e].group]++, any = 1;
    return any;
}

/* Whether sd's token i says a percentage: "percent", or a number written with "%" ("15%"). */
static int a_percentage(const side *sd, int i)
{
    const tok *t = &sd->t[i];
    return is_word(t, "percent") ||
           ((t->flags & F_NUM) && t->raw && mine(sd, t) &&
            t->raw + t->rawlen < sd->text + sd->textlen && t->raw[t->rawlen] == '%');
}

/* Whether a side takes a percentage off a price or adds it: "15% off 80", "20 percent off",
 * "80 increased by 15%". */
static int takes_off(const side *sd)
{
    /* (adds: "15% markup on 80") */
    static const char *const change[] = {"increase", "increased", "decrease", "decreased",
                                         "reduce",   "reduced",   "raise",    "raised",
                                         "markup",   "discount",  "discounted"};
    int pct = 0;
    for (int i = 0; i < sd->nt && !pct; i++)
        pct = a_percentage(sd, i);
    if (pct && SAYS_ONE_OF(sd, change)) return 1;
    for (int i = 1; i < sd->nt; i++)
        if (is_word(&sd->t[i], "off") && a_percentage(sd, i - 1)) return 1;
    return 0;
}

/* Whether a side asks for its answer as a percentage: "15 as a percentage of 80", "what
 * percent of 80 is 15", "the change in percent" (not "15 percent of 80", an amount). */
static int asks_percent(const side *sd)
{
    for (int i = 0; i < sd->nt; i++)
        if ((is_word(&sd->t[i], "percent") || is_word(&sd->t[i], "percentage")) &&
            (i == 0 || is_word(&sd->t[i - 1], "a") || is_word(&sd->t[i - 1], "what") ||
             is_word(&sd->t[i - 1], "in") || is_word(&sd->t[i - 1], "as")))
            return 1;
    return 0;
}

/* A question about a number that applies another operation to it: one side names an
 * operation (root, log, factorial, ...) more or less often than the other, or asks for a
 * percentage where the other asks for an amount ("15% of 80" vs "15 as a percentage of
 * 80"), or takes one off ("15% off 80"). */
static int rule_operation(const side *a, const side *b, char *why, size_t whylen)
{
    enum { N = sizeof math_ops / sizeof *math_ops };
    uint8_t ca[N], cb[N];
    int num = 0;
    for (int i = 0; i < a->nt && !num; i++)
        num = (a->t[i].flags & F_NUM) != 0;
    for (int i = 0; i < b->nt && !num; i++)
        num = (b->t[i].flags & F_NUM) != 0;
    if (num && asks_percent(a) != asks_percent(b)) {
        say(why, whylen, "%s asks for a percentage", asks_percent(a) ? "stored" : "query");
        return 0;
    }
    if (num && takes_off(a) != takes_off(b)) { /* "15% of 80" vs "15% off 80": 12 vs 68 */
        say(why, whylen, "%s takes a percentage off or adds it", takes_off(a) ? "stored" : "query");
        return 0;
    }
    int has_a = math_ops_of(a, ca), has_b = math_ops_of(b, cb);
    if (!num || (!has_a && !has_b)) return 1;
    for (int g = 0; g < N; g++) {
        if (ca[g] == cb[g]) continue;
        const side *sd = ca[g] > cb[g] ? a : b;
        for (int i = 0; i < sd->nt; i++)
            if (names_op(&sd->t[i], g)) {
                say(why, whylen, "operation differs: %s says \"%.*s\"",
                    sd == a ? "stored" : "query", (int)sd->t[i].len, sd->t[i].s);
                break;
            }
        return 0;
    }
    return 1;
}

/* ---- code and arithmetic, read from the raw text ---- */

enum { CODE_MAX = 64 }; /* operators and indented lines compared; more are vetoed */

static int is_op_char(char c)
{
    return in_set(c, "+*/=<>^%&|~");
}

/* Whether s[i] is an operator's character: one of is_op_char's, "!" before "=", or "-"
 * inside a run of them or not between two letters (not "e-mail"). */
static int op_at(const char *s, size_t n, size_t i, int in_run)
{
    if (s[i] == '%' && i > 0 && is_digit((unsigned char)s[i - 1]) &&
        (i + 1 == n || !is_alnum((unsigned char)s[i + 1])))
        return 0; /* "15%": a number's percent sign, not modulo */
    if (s[i] == '=' && !(i > 0 && s[i - 1] == '=') && !(i + 1 < n && s[i + 1] == '=')) {
        /* "2^10 = ?", "15% of 80 =": asks what is, as "what is" does (not "== vs ===") */
        size_t j = i + 1;
        while (j < n && (s[j] == '=' || s[j] == ' ' || s[j] == '?' || s[j] == '.'))
            j++;
        if (j == n) return 0;
    }
    if (is_op_char(s[i])) return 1;
    if (s[i] == '!') return i + 1 < n && s[i + 1] == '=';
    if (s[i] != '-') return 0;
    return in_run || !(i > 0 && i + 1 < n && is_alpha((unsigned char)s[i - 1]) &&
                       is_alpha((unsigned char)s[i + 1]));
}

/* The operators of a text in order: runs of + * / = < > ^ % & | ~, with "!" before "=" and
 * "-" not between two letters (not "e-mail"). Each is packed into a uint32_t (up to 4
 * characters; longer runs keep their first 4). Returns how many, or CODE_MAX + 1. */
static int operators_of(const char *s, size_t n, uint32_t *out)
{
    int k = 0;
    for (size_t i = 0; i < n;) {
        if (!op_at(s, n, i, 0)) {
            i++;
            continue;
        }
        uint32_t v = 0;
        int len = 0;
        while (i < n && op_at(s, n, i, 1)) {
            if (len < 4) v |= (uint32_t)(unsigned char)s[i] << (8 * len++);
            i++;
        }
        if (k == CODE_MAX) return CODE_MAX + 1;
        out[k++] = v;
    }
    return k;
}

/* The indentation of each line indented by two columns or more (a tab counts 4), as its
 * rank among the text's distinct indentations (so 2-space and 4-space styles compare
 * alike). Returns how many, or CODE_MAX + 1. */
static int indents_of(const char *s, size_t n, int *out)
{
    int k = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\n' && s[i] != '\r') continue;
        size_t j = i + 1;
        int width = 0;
        while (j < n && (s[j] == ' ' || s[j] == '\t'))
            width += s[j++] == '\t' ? 4 : 1;
        if (j == n || s[j] == '\n' || s[j] == '\r' || width < 2) continue;
        if (k == CODE_MAX) return CODE_MAX + 1;
        out[k++] = width;
    }
    int distinct[CODE_MAX], nd = 0; /* the widths, sorted, each once */
    for (int i = 0; i < k; i++) {
        int j = 0;
        while (j < nd && distinct[j] < out[i])
            j++;
        if (j < nd && distinct[j] == out[i]) continue;
        memmove(distinct + j + 1, distinct + j, sizeof *distinct * (size_t)(nd - j));
        distinct[j] = out[i];
        nd++;
    }
    for (int i = 0; i < k; i++) {
        int r = 0;
        while (distinct[r] != out[i])
            r++;
        out[i] = r + 1;
    }
    return k;
}

/* Code or arithmetic that differs where words do not: both sides use operators, not the
 * same ones ("2+3" vs "2*3", "a == b" vs "a === b", "7 / 2" vs "7 // 2"), or their lines
 * are indented differently (in Python a return moved into an if). */
static int rule_code(const char *a, size_t an, const char *b, size_t bn, char *why,
                     size_t whylen)
{
    uint32_t oa[CODE_MAX], ob[CODE_MAX];
    int na = operators_of(a, an, oa), nb = operators_of(b, bn, ob);
    /* operators are compared when both sides have some; past CODE_MAX they cannot be */
    if (na && nb && (na > CODE_MAX || nb > CODE_MAX)) {
        say(why, whylen, "too much code to compare");
        return 0;
    }
    if (na && nb && (na != nb || memcmp(oa, ob, sizeof *oa * (size_t)na))) {
        say(why, whylen, "operators differ");
        return 0;
    }
    int ia[CODE_MAX], ib[CODE_MAX];
    na = indents_of(a, an, ia);
    nb = indents_of(b, bn, ib);
    if ((na || nb) && (na > CODE_MAX || nb > CODE_MAX)) {
        say(why, whylen, "too much code to compare");
        return 0;
    }
    if (na != nb || memcmp(ia, ib, sizeof *ia * (size_t)na)) {
        say(why, whylen, "indentation differs");
        return 0;
    }
    return 1;
}

/* Whether t's word is written in sd's text (a token moved from the other side is not). */
static int mine(const side *sd, const tok *t)
{
    return t->raw >= sd->text && t->raw < sd->text + sd->textlen;
}

/* Whether t is read as it is written, letter case and all: quoted, code, or data after a
 * colon ("convert to lower case: HELLO"). */
static int literal(const side *sd, const tok *t)
{
    return t->raw && ((t->flags & (F_QUOTED | F_CODE)) ||
                      (mine(sd, t) && (size_t)(t->raw - sd->text) >= sd->data_at));
}

/* Whether sd writes a word as w[0, n) is written (exact 1), or, read as written, in any
 * letter case (0). */
static int written(const side *sd, const char *w, size_t n, int exact)
{
    for (int k = 0; k < sd->nt; k++) {
        const tok *t = &sd->t[k];
        if (t->raw && t->rawlen == n &&
            (exact ? !memcmp(t->raw, w, n) : literal(sd, t) && !strncasecmp(t->raw, w, n)))
            return 1;
    }
    return 0;
}

/* Whether a side asks about spelling: "spell check: recieve", "how is receive spelled". */
static int asks_spelling(const side *sd)
{
    for (int k = 0; k < sd->nt; k++) {
        const tok *t = &sd->t[k];
        if ((t->len >= 5 && !memcmp(t->s, "spell", 5)) ||
            (t->len >= 7 && !memcmp(t->s, "misspel", 7)) || is_word(t, "typo") ||
            is_word(t, "typos"))
            return 1;
    }
    return 0;
}

/* In a question about spelling, a word spelled otherwise on the other side (a slip, a
 * British form) is the point of the question, not a slip to read past. */
static int rule_spelling(const side *a, const side *b, char *why, size_t whylen)
{
    if (!asks_spelling(a) && !asks_spelling(b)) return 1;
    for (int i = 0; i < a->nt; i++) {
        const tok *x = &a->t[i];
        if (side_has(b, x)) continue;
        for (int j = 0; j < b->nt; j++) {
            const tok *y = &b->t[j];
            if (side_has(a, y) || !spelled_alike(x->s, x->len, y->s, y->len)) continue;
            say(why, whylen, "spelling differs: %.*s vs %.*s", (int)x->len, x->s, (int)y->len,
                y->s);
            return 0;
        }
    }
    return 1;
}

/* Whether t[k] is a single quote that opens a quotation: not an apostrophe after a letter
 * or digit ("don't", "the 90's", "Zoë's"). */
static int opens_single(const char *t, size_t k)
{
    return t[k] == '\'' && (k == 0 || !gw_wordy((unsigned char)t[k - 1]));
}

/* The next span of text between double quotes, backticks or single quotes in t[*at, n): its
 * start and length into from and len; 0 when there is none. A single quote closes at one
 * that no letter or digit follows; one that never closes ("escape ' in ...") is passed. */
static int next_quoted(const char *t, size_t n, size_t *at, size_t *from, size_t *len)
{
    for (;;) {
        while (*at < n && t[*at] != '"' && t[*at] != '`' && !opens_single(t, *at))
            (*at)++;
        if (*at >= n) return 0;
        const char q = t[(*at)++];
        const char *end = memchr(t + *at, q, n - *at);
        while (q == '\'' && end && end + 1 < t + n && gw_wordy((unsigned char)end[1]))
            end = memchr(end + 1, q, (size_t)(t + n - end - 1));
        if (!end && q == '\'') continue;
        if (!end) return 0;
        *from = *at;
        *len = (size_t)(end - (t + *at));
        *at = (size_t)(end - t) + 1;
        return 1;
    }
}

/* Whether two texts are the same but for white space. */
static int same_but_spaces(const char *a, size_t al, const char *b, size_t bl)
{
    size_t i = 0, j = 0;
    for (;;) {
        while (i < al && (a[i] == ' ' || a[i] == '\t')) i++;
        while (j < bl && (b[j] == ' ' || b[j] == '\t')) j++;
        if (i == al || j == bl) return i == al && j == bl;
        if (a[i++] != b[j++]) return 0;
    }
}

/* 'len("hello")' vs 'len("hello ")': quoted text is read as written, its spaces too. */
static int rule_quoted_spaces(const side *a, const side *b, char *why, size_t whylen)
{
    size_t ai = 0, bi = 0, af, al, bf, bl;
    while (next_quoted(a->text, a->textlen, &ai, &af, &al) &&
           next_quoted(b->text, b->textlen, &bi, &bf, &bl))
        if ((al != bl || memcmp(a->text + af, b->text + bf, al)) &&
            same_but_spaces(a->text + af, al, b->text + bf, bl)) {
            say(why, whylen, "quoted text differs in its spaces");
            return 0;
        }
    return 1;
}

/* Text t[0, n) as a task reads it: lower case, its white space one space, without the
 * marks of `ends` at its end, into out (n bytes at most); its length. */
static size_t task_text(const char *t, size_t n, const char *ends, char *out)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)t[i];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            if (m && out[m - 1] != ' ')
                out[m++] = ' ';
        } else
            out[m++] = lower(c);
    }
    while (m && strchr(ends, out[m - 1]))
        m--;
    return m;
}

/* Whether y[0, ny) holds x[0, nx) as whole words. */
static int holds_words(const char *y, size_t ny, const char *x, size_t nx)
{
    for (size_t k = 0; nx && k + nx <= ny; k++)
        if (!memcmp(y + k, x, nx) && (k == 0 || !gw_wordy((unsigned char)y[k - 1])) &&
            (k + nx == ny || !gw_wordy((unsigned char)y[k + nx])))
            return 1;
    return 0;
}

/* The next span between curly double quotes (U+201C, U+201D) in t[*at, n), as
 * next_quoted() gives one. */
static int next_curly(const char *t, size_t n, size_t *at, size_t *from, size_t *len)
{
    static const char open[] = "\xe2\x80\x9c", close[] = "\xe2\x80\x9d";
    for (size_t i = *at; i + 3 <= n; i++) {
        if (memcmp(t + i, open, 3)) continue;
        for (size_t j = i + 3; j + 3 <= n; j++)
            if (!memcmp(t + j, close, 3)) {
                *from = i + 3;
                *len = j - i - 3;
                *at = j + 3;
                return 1;
            }
        return 0;
    }
    return 0;
}

/* The next quotation of t[*at, n): straight quotes or backticks, or curly quotes. */
static int next_quotation(const char *t, size_t n, int curly, size_t *at, size_t *from,
                          size_t *len)
{
    return curly ? next_curly(t, n, at, from, len) : next_quoted(t, n, at, from, len);
}

/* t[0, n) with its contractions spelled out ("where's" is "where is", "don't" "do not",
 * "can't" and "cannot" "can not"), into out (3n bytes at most: "'d" is " would"); its
 * length. */
static size_t spell_out(const char *t, size_t n, char *out)
{
    static const struct {
        const char *c, *full;
    } forms[] = {{"n't", " not"}, {"'s", " is"},   {"'m", " am"},   {"'re", " are"},
                 {"'ll", " will"}, {"'ve", " have"}, {"'d", " would"}};
    enum { N = sizeof forms / sizeof *forms };
    size_t m = 0;
    for (size_t i = 0; i < n;) {
        if ((i == 0 || !gw_wordy((unsigned char)t[i - 1])) && i + 6 <= n &&
            !strncasecmp(t + i, "cannot", 6) &&
            (i + 6 == n || !gw_wordy((unsigned char)t[i + 6]))) {
            memcpy(out + m, "can not", 7);
            m += 7;
            i += 6;
            continue;
        }
        size_t k = 0, l = 0;
        for (; k < N; k++) {
            l = strlen(forms[k].c);
            if (i > 0 && i + l <= n && !strncasecmp(t + i, forms[k].c, l) &&
                (i + l == n || !gw_wordy((unsigned char)t[i + l])))
                break;
        }
        if (k == N) {
            out[m++] = t[i++];
            continue;
        }
        if (k == 0 && m >= 2 && !strncasecmp(out + m - 2, "ca", 2)) /* can't */
            out[m++] = 'n';
        size_t fl = strlen(forms[k].full);
        memcpy(out + m, forms[k].full, fl);
        m += fl;
        i += l;
    }
    return m;
}

/* Quoted text t[0, n) as a task reads it, its contractions spelled out (malloc'd; NULL out
 * of memory), and its length. */
static char *quoted_words(const char *t, size_t n, size_t *len)
{
    char *sp = malloc(3 * n + 1), *out = malloc(3 * n + 1);
    if (!sp || !out) {
        free(sp);
        free(out);
        return NULL;
    }
    *len = task_text(sp, spell_out(t, n, sp), " .!?,", out);
    free(sp);
    return out;
}

/* 'translate "he is tired" into Spanish' vs '"she is tired"': quoted text is what a task
 * works on, and its answer changes with any word of it, a pronoun or a stop word too. The
 * quotations are compared in turn, as far as both sides have them (straight quotes, then
 * curly ones), contractions spelled out ("where's", "where is"); one that quotes a part of
 * the other (an error message, then the module it names) is no other text. */
static int rule_quoted_text(const side *a, const side *b, char *why, size_t whylen)
{
    for (int curly = 0; curly < 2; curly++) {
        size_t ai = 0, bi = 0, af, al, bf, bl;
        while (next_quotation(a->text, a->textlen, curly, &ai, &af, &al) &&
               next_quotation(b->text, b->textlen, curly, &bi, &bf, &bl)) {
            size_t nx = 0, ny = 0;
            char *x = quoted_words(a->text + af, al, &nx);
            char *y = quoted_words(b->text + bf, bl, &ny);
            int same = !x || !y || (nx == ny && !memcmp(x, y, nx)) ||
                       holds_words(x, nx, y, ny) || holds_words(y, ny, x, nx);
            free(x);
            free(y);
            if (!same) {
                say(why, whylen, "the quoted text differs");
                return 0;
            }
        }
    }
    return 1;
}

/* Whether t begins a sentence of sd's data: the first word after the colon, or one after
 * ". ", "! ", "? " or a line break. */
static int sentence_start(const side *sd, const tok *t)
{
    if (!mine(sd, t)) return 0;
    size_t at = (size_t)(t->raw - sd->text);
    if (at == sd->data_at) return 1;
    if (at > sd->data_at && sd->text[at - 1] == '\n') return 1;
    while (at > sd->data_at && sd->text[at - 1] == ' ')
        at--;
    return at > sd->data_at && at < (size_t)(t->raw - sd->text) &&
           memchr(".!?\n", sd->text[at - 1], 4) != NULL;
}

/* Whether q writes t's word with its letters after the first in t's case: the two differ
 * in the first letter alone, as a sentence's capital does. */
static int other_case_beyond_first(const side *q, const tok *t)
{
    for (int k = 0; k < q->nt; k++) {
        const tok *u = &q->t[k];
        if (u->raw && u->rawlen == t->rawlen && !strncasecmp(u->raw, t->raw, 1) &&
            !memcmp(u->raw + 1, t->raw + 1, t->rawlen - 1u))
            return 1;
    }
    return 0;
}

/* The next [...] of t[*at, n) without its spaces, into out (cap bytes); its length, or -1
 * when there is none. */
static int next_brackets(const char *t, size_t n, size_t *at, char *out, size_t cap)
{
    const char *o = memchr(t + *at, '[', n - *at);
    if (!o) return -1;
    const char *c = memchr(o, ']', (size_t)(t + n - o));
    if (!c) return -1;
    size_t m = 0;
    for (const char *x = o + 1; x < c && m + 1 < cap; x++)
        if (*x != ' ') out[m++] = *x;
    *at = (size_t)(c - t) + 1;
    return (int)m;
}

/* "a[1:]" vs "a[:1]", "[^abc]" vs "[abc]": what stands in brackets (a slice, an index, a
 * character class) is read as written, in turn on both sides. */
static int rule_brackets(const side *a, const side *b, char *why, size_t whylen)
{
    size_t ai = 0, bi = 0;
    char x[64], y[64];
    int xl, yl;
    while ((xl = next_brackets(a->text, a->textlen, &ai, x, sizeof x)) >= 0 &&
           (yl = next_brackets(b->text, b->textlen, &bi, y, sizeof y)) >= 0)
        if (xl != yl || memcmp(x, y, (size_t)xl)) {
            say(why, whylen, "brackets differ: [%.*s] vs [%.*s]", xl, x, yl, y);
            return 0;
        }
    return 1;
}

/* Whether the quote at t[i] opens a literal that code reads as a string: a word in quotes
 * (no space in it) as an argument or an operand: "len('123')", "'1' + 1", "x == 'a'". */
static int quoted_literal(const char *t, size_t n, size_t i)
{
    if (i > 0 && isalnum((unsigned char)t[i - 1])) return 0; /* (an apostrophe: "don't") */
    size_t e = i + 1;
    while (e < n && e < i + 40 && t[e] != t[i] && t[e] != ' ')
        e++;
    if (e >= n || t[e] != t[i] || e == i + 1 || (e + 1 < n && isalnum((unsigned char)t[e + 1])))
        return 0;
    size_t p = i, q = e + 1;
    while (p > 0 && t[p - 1] == ' ')
        p--;
    while (q < n && t[q] == ' ')
        q++;
    char before = p > 0 ? t[p - 1] : ' ', after = q < n ? t[q] : ' ';
    return (i > 0 && in_set(t[i - 1], "([,")) || (e + 1 < n && in_set(t[e + 1], ")]")) ||
           in_set(before, "+-*/%=<>!") || in_set(after, "+-*/%=<>!");
}

/* The signs of sd's text that code and commands read, in order, into out (at most cap - 1;
 * its length): "checkout ." is not "checkout -", ".*" not ".*?", "./tmp" not "/tmp", "!" not
 * "!!". Not a sentence's punctuation, nor a hyphen or slash inside a word ("3-year-old",
 * "km/h"), nor the dot of a decimal or of "U.S.", nor a time's colon. */
static size_t code_signs(const side *sd, char *out, size_t cap)
{
    const char *t = sd->text;
    size_t n = sd->textlen, m = 0;
    while (n > 0 && in_set(t[n - 1], ".?! \t\r\n"))
        n--; /* (the sentence's end) */
    for (size_t i = 0; i < n && m + 1 < cap; i++) {
        char c = t[i];
        if ((c == '\'' || c == '"') && quoted_literal(t, n, i)) {
            out[m++] = 'q'; /* a string, not the value: print('2' * 3), "null" == null */
            continue;
        }
        if (!in_set(c, "-/:$?*+^\\|!~@#%&=<>.")) continue;
        int before = i > 0 ? (unsigned char)t[i - 1] : ' ';
        int after = i + 1 < n ? (unsigned char)t[i + 1] : ' ';
        size_t r0 = i, l0 = i; /* the run of c that i is in */
        while (l0 > 0 && t[l0 - 1] == c)
            l0--;
        while (r0 < n && t[r0] == c)
            r0++;
        if ((c == '.' || c == '!') && r0 - l0 > 1) continue; /* "Wait...", "Help!!" */
        if ((c == '-' || c == '/') && l0 > 0 && t[l0 - 1] == ' ' && r0 < n && t[r0] == ' ')
            continue; /* a dash between words ("Python - how to"), "A / B" */
        if (c == '*' && !(l0 > 0 && t[l0 - 1] == '.') &&
            ((l0 > 0 && isalpha((unsigned char)t[l0 - 1])) ||
             (r0 < n && isalpha((unsigned char)t[r0]))))
            continue; /* emphasis: "**bold**" */
        if (c == ':' && in_set((char)after, ")(DP")) continue; /* ":)" */
        if (in_set(c, ".?!:;") && (after == ' ' || after == '"' || after == '\'' || i + 1 == n) &&
            (isalnum(before) || in_set((char)before, "\"')]")))
            continue; /* a sentence's punctuation, in quotes too ("Where is it?") */
        if ((c == '-' || c == '/') && isalnum(before) && isalnum(after)) continue;
        if (c == '/' && (before == 'w' || before == 'W') &&
            (i < 2 || !isalnum((unsigned char)t[i - 2])))
            continue; /* "w/" and "w/o", "with" and "without" (tokenize()) */
        if (c == '.' && (isupper(before) || (isdigit(before) && isdigit(after)))) continue;
        if (c == '.' && isalpha(before) && (i < 2 || !isalnum((unsigned char)t[i - 2])))
            continue; /* "e.g.", "i.e." */
        if (c == ':' && isdigit(before) && isdigit(after)) continue;
        if (c == '$' && isdigit(after)) continue; /* a price: the numbers' rule reads it */
        size_t l = i, r = i + 1; /* arithmetic between numbers: the operators' rule's */
        while (l > 0 && t[l - 1] == ' ')
            l--;
        while (r < n && t[r] == ' ')
            r++;
        if (l > 0 && r < n && isdigit((unsigned char)t[l - 1]) && isdigit((unsigned char)t[r]))
            continue;
        out[m++] = c;
    }
    out[m] = 0;
    return m;
}

/* "What does git checkout . do?" vs "git checkout - do?": the same words, and signs that
 * code reads otherwise (code_signs()). */
static int rule_signs(const side *a, const side *b, char *why, size_t whylen)
{
    int i = 0, j = 0;
    for (;;) {
        while (i < a->nt && !mine(a, &a->t[i]))
            i++;
        while (j < b->nt && !mine(b, &b->t[j]))
            j++;
        if (i == a->nt || j == b->nt) {
            if (i != a->nt || j != b->nt) return 1;
            break;
        }
        if (!tok_eq(&a->t[i++], &b->t[j++])) return 1;
    }
    char x[64], y[64];
    code_signs(a, x, sizeof x);
    code_signs(b, y, sizeof y);
    if (!strcmp(x, y)) return 1;
    say(why, whylen, "signs differ: %s vs %s", x[0] ? x : "none", y[0] ? y : "none");
    return 0;
}

/* Whether the quotation t opens holds a space before it closes: a sentence, not a word. */
static int quoted_sentence(const side *sd, const tok *t)
{
    const char q = t->raw[-1], *end = sd->text + sd->textlen;
    for (const char *c = t->raw; c < end && *c != q; c++)
        if (*c == ' ') return 1;
    return 0;
}

/* Whether t's raw letters are all capitals. */
static int all_caps(const tok *t)
{
    for (size_t i = 0; i < t->rawlen; i++)
        if (!isupper((unsigned char)t->raw[i])) return 0;
    return 1;
}

/* Whether t is written with a capital, then small letters only. */
static int capitalized(const tok *t)
{
    for (size_t i = 1; i < t->rawlen; i++)
        if (!islower((unsigned char)t->raw[i])) return 0;
    return isupper((unsigned char)t->raw[0]);
}

/* Whether sd's text has a small letter (no text all in capitals, whose case says nothing). */
static int has_lower(const side *sd)
{
    for (size_t i = 0; i < sd->textlen; i++)
        if (islower((unsigned char)sd->text[i])) return 1;
    return 0;
}

/* Whether t is a word of 2 to 4 letters written in sd with a capital, not at a sentence's
 * start, nor a word of phrasing ("OK"): a symbol or a unit whose case may count. */
static int cased_symbol(const side *sd, const tok *t)
{
    if (!t->raw || !mine(sd, t) || t->rawlen < 2 || t->rawlen > 4 || (t->flags & F_STOP) ||
        sentence_start(sd, t))
        return 0;
    const char *c = t->raw;
    while (c > sd->text && c[-1] == ' ')
        c--;
    if (c == sd->text || in_set(c[-1], ".?!\n")) return 0; /* a sentence's first word */
    int up = 0;
    for (size_t i = 0; i < t->rawlen; i++) {
        if (!isalpha((unsigned char)t->raw[i])) return 0;
        up |= isupper((unsigned char)t->raw[i]) != 0;
    }
    return up;
}

/* "'ABC'.isupper()" vs "'abc'.isupper()", "lower case: HELLO" vs "lower case: hello": the
 * embedding reads no letter case, so a word both sides quote, or give as code or data, in
 * other letter case is another question; elsewhere case says nothing ("france", an error
 * message quoted on one side only), but in a symbol or a unit both sides write with
 * capitals (cased_symbol(): "CO" and "Co"). */
static int rule_case(const side *a, const side *b, char *why, size_t whylen)
{
    for (int pass = 0; pass < 2; pass++) {
        const side *p = pass ? b : a, *q = pass ? a : b;
        for (int k = 0; k < p->nt; k++) {
            const tok *t = &p->t[k];
            if (!literal(p, t) || written(q, t->raw, t->rawlen, 1) ||
                !written(q, t->raw, t->rawlen, 0))
                continue;
            /* a language the lexicon names, read as code for its symbols: "C++", "c#" */
            if (t->lex >= 0 && (memchr(t->raw, '+', t->rawlen) || memchr(t->raw, '#', t->rawlen)))
                continue;
            /* data (not quoted, not code, not camelCase) capitalized as a sentence is:
             * "Translate to Spanish: Good morning" vs "...: good morning", "I" and "i" */
            if (!(t->flags & (F_QUOTED | F_CODE | F_MIXED)) &&
                (sentence_start(p, t) || (t->rawlen == 1 && (t->raw[0] | 0x20) == 'i')) &&
                other_case_beyond_first(q, t))
                continue;
            /* nor a quoted sentence's first word: "translate 'Where is it?'" vs "'where is
             * it?'" (a quoted word is a literal: "'Apple' == 'apple'") */
            if ((t->flags & F_QUOTED) && mine(p, t) && t->raw > p->text &&
                in_set(t->raw[-1], "'\"`") && quoted_sentence(p, t) &&
                other_case_beyond_first(q, t))
                continue;
            say(why, whylen, "letter case differs: %.*s", (int)t->rawlen, t->raw);
            return 0;
        }
    }
    /* symbols and units, where both sides write capitals: "CO" and "Co" (carbon monoxide,
     * cobalt), "MB" and "Mb", "Mbps" and "MBps"; not an acronym written as a name ("SQL",
     * "Sql"), nor a sentence's first word, nor in shouted text */
    const int cased = has_lower(a) && has_lower(b);
    for (int k = 0; k < a->nt && cased; k++) {
        const tok *t = &a->t[k];
        if (!cased_symbol(a, t)) continue;
        for (int j = 0; j < b->nt; j++) {
            const tok *u = &b->t[j];
            if (!cased_symbol(b, u) || u->rawlen != t->rawlen ||
                strncasecmp(u->raw, t->raw, t->rawlen) || !memcmp(u->raw, t->raw, t->rawlen))
                continue;
            /* an acronym written as a name ("Sql", "Ai"), but for symbols whose case counts */
            static const char *const cased[] = {"co", "no", "hf", "sn", "nb", "cs", "mb",
                                                "gb", "kb", "tb", "pb", "ms", "mg"};
            int ta = all_caps(t), ua = all_caps(u), listed = 0;
            for (size_t c = 0; c < sizeof cased / sizeof *cased && t->rawlen == 2; c++)
                listed |= !strncasecmp(t->raw, cased[c], 2);
            if (!listed && ((ta && capitalized(u)) || (ua && capitalized(t)))) continue;
            say(why, whylen, "letter case differs: %.*s vs %.*s", (int)t->rawlen, t->raw,
                (int)u->rawlen, u->raw);
            return 0;
        }
    }
    return 1;
}

/* One side is the other with a qualifier added: every content word of the shorter one is
 * in the longer one, which says more, in a way that narrows the question ("a recipe for
 * lasagna" vs "a recipe for vegan lasagna", "symptoms of diabetes" vs "symptoms of
 * diabetes in children"). The stored answer to the broad question does not answer the
 * narrow one, nor the narrow answer the broad question. */
/* Whether sd says a group of people after a subordinator: "while pregnant". */
static int asker_condition(const side *sd)
{
    for (int j = 1; j < sd->nt; j++)
        if (word_is(&sd->t[j], K_AUDIENCE) && word_is(&sd->t[j - 1], K_SUBORD)) return 1;
    return 0;
}

static int rule_added(const side *a, const side *b, char *why, size_t whylen)
{
    for (int pass = 0; pass < 2; pass++) {
        const side *p = pass ? b : a, *q = pass ? a : b;
        /* a condition of the asker's added narrows also in other words: "is it safe to take
         * both" vs "can I take both while pregnant" */
        int within = words_within(p, q);
        if (!within && run_has(p, 0, p->nt - 1, K_AUDIENCE)) continue;
        int j = within || asker_condition(q) ? narrowing(p, q) : -1;
        if (j < 0 || (!within && !(word_is(&q->t[j], K_AUDIENCE) && j > 0 &&
                                   word_is(&q->t[j - 1], K_SUBORD))))
            continue;
        say(why, whylen, "%s adds \"%.*s\"", pass ? "stored" : "query", (int)q->t[j].len,
            q->t[j].s);
        return 0;
    }
    return 1;
}

/* Whether x names a language, a tool or a system: a word of those groups of the lexicon. */
static int tool_name(const tok *x)
{
    static const char *const kinds[] = {"python", "git",   "npm",    "mysql", "windows",
                                        "react",  "django", "aws",   "bash",  "vim",
                                        "chrome", "html"};
    if (x->lex < 0) return 0;
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++)
        if (lex_share(x->lex, lex_find(kinds[k], strlen(kinds[k])), K_CONTRAST)) return 1;
    return 0;
}

/* Whether sd asks a way: "how do I", "how can you", "how to", "how should we". */
static int asks_how_to(const side *sd)
{
    if (sd->nt < 2 || !is_word(&sd->t[0], "how")) return 0;
    const tok *t = &sd->t[1], *u = sd->nt > 2 ? &sd->t[2] : NULL;
    return is_word(t, "to") ||
           ((is_word(t, "do") || is_word(t, "can") || is_word(t, "should") ||
             is_word(t, "could")) &&
            u && (is_word(u, "i") || is_word(u, "you") || is_word(u, "we")));
}

/* Whether q's kept word iq[k], inserted after p's i words, is a preposition that opens a
 * phrase ending q where p ends, the place, vessel or means of a how-to: "make brownies in a
 * mug", "grow basil from cuttings", "learn guitar by ear" (a way asked one way, not any
 * way). */
static int tail_method(const side *p, const side *q, const int *iq, int i, int np, int k)
{
    static const char *const preps[] = {"in", "from", "by", "inside", "using", "with"};
    if (i != np || !asks_how_to(p)) return 0;
    const tok *t = &q->t[iq[k]];
    if (!ONE_OF(t, preps) || k != i) return 0;
    /* (not the asker's own setting, "in my car", nor a name: "in JavaScript" is the name
     * rule's) */
    int content = 0;
    for (int m = iq[k] + 1; m < q->nt; m++) { /* (all its words: "my" is no kept word) */
        const tok *u = &q->t[m];
        if (is_word(u, "my") || is_word(u, "our") || is_word(u, "your") ||
            (u->flags & (F_ENTITY | F_CAP | F_ACRO | F_MIXED | F_CODE | F_QUOTED)) ||
            tool_name(u))
            return 0;
        content |= !(u->flags & (F_STOP | F_NUM));
    }
    return content;
}

/* "How do I clean a mechanical keyboard?" vs "How do I clean a keyboard?", "red wine" vs
 * "wine": the same words in the same order but for one or two more that the other side
 * says nowhere (added_word()), which narrow it, whatever they are. A reworded question
 * hardly ever only inserts a word. */
static int rule_inserted(const side *a, const side *b, char *why, size_t whylen)
{
    int ia[MAX_TOK], ib[MAX_TOK];
    int na = kept_words(a, ia), nb = kept_words(b, ib);
    for (int pass = 0; pass < 2; pass++) {
        const side *p = pass ? b : a, *q = pass ? a : b;
        const int *ip = pass ? ib : ia, *iq = pass ? ia : ib;
        int np = pass ? nb : na, nq = pass ? na : nb, n = nq - np, i = 0, ok = 1;
        if (n < 1 || n > 5) continue;
        while (i < np && tok_like(&p->t[ip[i]], &q->t[iq[i]]))
            i++;
        /* a how-to's place, vessel or means at its end, in a longer phrase: "wash a down
         * jacket in the washing machine" */
        if (n > 2) {
            if (i == np && tail_method(p, q, iq, i, np, i)) {
                say(why, whylen, "%s adds \"%.*s %.*s\"", pass ? "stored" : "query",
                    (int)q->t[iq[i]].len, q->t[iq[i]].s, (int)q->t[iq[i + 1]].len,
                    q->t[iq[i + 1]].s);
                return 0;
            }
            continue;
        }
        /* not words before it all ("Quick question: what is ..."), nor a class after a name
         * or a number ("a 401k retirement plan", "the vim editor") */
        const tok *before = i > 0 ? &q->t[iq[i - 1]] : NULL;
        if (!before || (before->flags & (F_NUM | F_ACRO))) continue;
        for (int k = i; k < np && ok; k++)
            ok = tok_like(&p->t[ip[k]], &q->t[iq[k + n]]);
        /* "myself" is one ("install a dishwasher myself"); not a preposition's phrase, whose
         * setting is often the one implied ("in my car", "per day"): narrowing() knows those
         * that narrow ("in the oven", "from scratch") */
        for (int k = i; k < i + n && ok; k++) {
            const tok *t = &q->t[iq[k]];
            int mine = t->len > 4 && !memcmp(t->s + t->len - 4, "self", 4);
            ok = mine || (added_word(p, q, iq[k]) && !word_is(t, K_FILLER)) ||
                 tail_method(p, q, iq, i, np, k);
        }
        /* nor the class a word both say is of ("the fall season", "the vim editor", "my
         * Gmail account"), nor a class before a name ("the movie Jaws") */
        if (ok && i > 0 && n == 1 && singular_is(&q->t[iq[i]], K_CLASS)) continue;
        if (!ok || (i + n < nq && (q->t[iq[i + n]].flags & (F_ENTITY | F_CAP))))
            continue;
        say(why, whylen, "%s adds \"%.*s\"", pass ? "stored" : "query", (int)q->t[iq[i]].len,
            q->t[iq[i]].s);
        return 0;
    }
    return 1;
}

/* When a side reads the time noun like `noun` (a year, a season): 0 now ("this year",
 * "the year"), 1 before ("last year"), 2 after ("next year"); -1 when it does not say it. */
static int deixis_of(const side *sd, const tok *noun)
{
    for (int i = 0; i < sd->nt; i++) {
        if (!tok_eq(&sd->t[i], noun)) continue;
        /* "last night's game": the word before is another time noun's */
        for (int k = i - 1; k >= 0 && k >= i - 2; k--) {
            if (lex_has(lex_find(sd->t[k].n, sd->t[k].nlen), K_TIMENOUN)) break;
            for (int e = lex_find(sd->t[k].s, sd->t[k].len); e >= 0; e = lex[e].next)
                if (lex[e].kind == K_DEIXIS) return lex[e].group;
        }
        return 0;
    }
    return -1;
}

/* A time counted back or ahead: 1 "3 months ago", 2 "in 3 months" ("in a week"), else 0. */
static int ago_or_ahead(const side *sd)
{
    for (int i = 0; i < sd->nt; i++) {
        if (is_word(&sd->t[i], "ago")) return 1;
        if (is_word(&sd->t[i], "in") && i + 2 < sd->nt &&
            ((sd->t[i + 1].flags & F_NUM) || is_word(&sd->t[i + 1], "a")) &&
            lex_has(lex_find(sd->t[i + 2].n, sd->t[i + 2].nlen), K_TIMENOUN))
            return 2;
    }
    return 0;
}

/* "Who won this year" vs "who won last year": a time noun both sides say, read at
 * different times. */
static int rule_time(const side *a, const side *b, char *why, size_t whylen)
{
    static const char *const when[] = {"now", "before", "after"};
    /* "if it expired 3 months ago" vs "if it expires in 3 months" */
    int ba = ago_or_ahead(a), bb = ago_or_ahead(b);
    if (ba && bb && ba != bb) {
        say(why, whylen, "time differs: %s vs %s", ba == 1 ? "ago" : "ahead",
            bb == 1 ? "ago" : "ahead");
        return 0;
    }
    for (int i = 0; i < a->nt; i++) {
        const tok *n = &a->t[i];
        if (!lex_has(lex_find(n->n, n->nlen), K_TIMENOUN)) continue;
        int da = deixis_of(a, n), db = deixis_of(b, n);
        if (db < 0 || da == db) continue;
        say(why, whylen, "time differs: %.*s %s vs %s", (int)n->len, n->s, when[da], when[db]);
        return 0;
    }
    return 1;
}

/* "one YouTube channel" vs "all my channels", "a single row" vs "every row": one side
 * asks about one, the other about all. */
static int asks(const tok *t)
{
    return (t->flags & F_WH) || is_word(t, "what") || is_word(t, "which");
}

/* "who wrote Hamlet" vs "who writes Hamlet": a question word's verb in two tenses, spelled
 * by an irregular verb's forms (a regular one's -ed also makes adjectives and passives). */
static int rule_verb_tense(const side *a, const side *b, char *why, size_t whylen)
{
    if (a->nt < 2 || b->nt < 2 || !asks(&a->t[0]) || !asks(&b->t[0])) return 1;
    const tok *x = &a->t[1], *y = &b->t[1];
    unsigned fx, fy;
    int vx = lex_verb(lex_find(x->s, x->len), &fx), vy = lex_verb(lex_find(y->s, y->len), &fy);
    if (vx < 0 || vx != vy) return 1;
    const unsigned past = 1u << 3, now = 7u;
    if (((fx & past) && !(fx & now) && (fy & now) && !(fy & past)) ||
        ((fy & past) && !(fy & now) && (fx & now) && !(fx & past))) {
        say(why, whylen, "tense differs: %.*s vs %.*s", (int)x->len, x->s, (int)y->len, y->s);
        return 0;
    }
    return 1;
}

/* Whether t says a past that f says after its "will" at w, in its main clause: an
 * auxiliary of the past (was, did), or the past or participle of a verb f says there ("who
 * won" vs "who will win", "how has it changed" vs "how will it change"). */
static int past_of_future(const tok *t, const side *f, int w)
{
    if (word_is(t, K_PAST) || is_word(t, "been")) return 1;
    const unsigned past = 3u << 3, now = 7u;
    unsigned ft, fi;
    int v = lex_verb(lex_find(t->s, t->len), &ft);
    int ed = t->len > 4 && !memcmp(t->s + t->len - 2, "ed", 2);
    for (int i = w + 1; i < f->nt && !word_is(&f->t[i], K_SUBORD); i++) {
        const tok *x = &f->t[i];
        if (v >= 0 && (ft & past) && !(ft & now) &&
            lex_verb(lex_find(x->s, x->len), &fi) == v && (fi & now))
            return 1;
        if (v < 0 && ed && inflected(t->s, t->len, x->s, x->len)) return 1;
    }
    return 0;
}

/* Where a side says its future ends: "will", "is going to", "is expected to"; -1 when it
 * does not. */
static int future_at(const side *sd)
{
    for (int i = 0; i < sd->nt; i++) {
        if (is_word(&sd->t[i], "will")) return i;
        if (i + 1 < sd->nt && (is_word(&sd->t[i], "going") || is_word(&sd->t[i], "expected")) &&
            is_word(&sd->t[i + 1], "to"))
            return i + 1;
    }
    return -1;
}

/* Whether t is the present -s of a verb f says ("owns" for "used to own"). */
static int present_of(const tok *t, const side *f)
{
    if (t->len < 4 || t->s[t->len - 1] != 's') return 0;
    for (int i = 0; i < f->nt; i++)
        if (f->t[i].len + 1 == t->len && !memcmp(f->t[i].s, t->s, f->t[i].len)) return 1;
    return 0;
}

/* Whether a side says "used to": a past that no longer holds. */
static int used_to(const side *sd)
{
    for (int i = 0; i + 1 < sd->nt; i++)
        if (is_word(&sd->t[i], "used") && is_word(&sd->t[i + 1], "to")) return 1;
    return 0;
}

/* "Who will win the final?" vs "Who won the final?", "What used to be the capital?" vs
 * "What is the capital?": a future or a former past against another time. */
static int rule_future(const side *a, const side *b, char *why, size_t whylen)
{
    for (int pass = 0; pass < 2; pass++) {
        const side *f = pass ? b : a, *p = pass ? a : b;
        /* "what used to be the capital" vs "what is the capital" */
        if (used_to(f) && !used_to(p))
            for (int j = 0; j < p->nt; j++)
                if ((word_is(&p->t[j], K_NOW) && !is_word(&p->t[j], "can")) ||
                    present_of(&p->t[j], f)) {
                    say(why, whylen, "tense differs: used to vs %.*s", (int)p->t[j].len,
                        p->t[j].s);
                    return 0;
                }
        int w = future_at(f);
        if (w < 0 || future_at(p) >= 0) continue;
        /* the main clauses: "what will happen if I miss it" vs "what happens if I missed it" */
        for (int j = 0; j < p->nt && !(j > 0 && word_is(&p->t[j], K_SUBORD)); j++)
            if (past_of_future(&p->t[j], f, w)) {
                const tok *m = is_word(&f->t[w], "to") ? &f->t[w - 1] : &f->t[w];
                say(why, whylen, "tense differs: %.*s%s vs %.*s", (int)m->len, m->s,
                    m == &f->t[w] ? "" : " to", (int)p->t[j].len, p->t[j].s);
                return 0;
            }
    }
    return 1;
}

/* Whether a side asks yes or no: it opens with an auxiliary ("can cats eat tuna", "should
 * I refinance"), not a request ("can you explain"), a question of existence ("is there a
 * way") or a choice ("should I use who or whom"). */
static int yes_no(const side *sd)
{
    static const char *const modals[] = {"could", "should", "would", "may", "might", "must"};
    if (sd->nt < 2) return 0;
    const tok *t = &sd->t[0], *u = &sd->t[1];
    int aux = word_is(t, K_NOW) || word_is(t, K_PAST);
    for (size_t i = 0; i < sizeof modals / sizeof *modals && !aux; i++)
        aux = is_word(t, modals[i]);
    if (!aux || is_word(u, "you") || is_word(u, "there") || is_word(u, "someone") ||
        is_word(u, "anyone") || is_word(u, "somebody") || is_word(u, "anybody"))
        return 0; /* (a request: "can someone explain") */
    for (int i = 1; i < sd->nt; i++) /* (a choice: "will vs trust") */
        if (is_word(&sd->t[i], "or") || is_word(&sd->t[i], "vs") || is_word(&sd->t[i], "versus"))
            return 0;
    return 1;
}

/* What a side's modal asks: 1 leave ("can I", "may I", "am I allowed to"), 2 duty ("must
 * I", "do I have to", "am I required to"), 3 advice ("should I"), 0 none ("do I need to" is
 * duty or advice). */
static int modal_of(const side *sd)
{
    for (int i = 0; i < sd->nt && i < 5; i++) {
        const tok *t = &sd->t[i];
        if (is_word(t, "can") || is_word(t, "may") || is_word(t, "allowed")) return 1;
        if (is_word(t, "must") || is_word(t, "required") ||
            (is_word(t, "have") && i + 1 < sd->nt && is_word(&sd->t[i + 1], "to")))
            return 2;
        if (is_word(t, "should") || is_word(t, "ought")) return 3;
    }
    return 0;
}

/* "Should I tell my boss?" vs "Do I have to tell my boss?", "Can I bring food on a plane?"
 * vs "Must I declare food on a plane?": leave, duty and advice are three yes-or-no
 * questions. */
static int rule_modal(const side *a, const side *b, char *why, size_t whylen)
{
    static const char *const names[] = {"", "may", "must", "should"};
    int x = modal_of(a), y = modal_of(b);
    if (!x || !y || x == y || !yes_no(a) || !yes_no(b)) return 1; /* not "how can I" */
    say(why, whylen, "question differs: %s vs %s", names[x], names[y]);
    return 0;
}

/* Whether a side opens with a how of amount or time ("how much tuna", "how long"), of way
 * ("how do I"), a why, or asks what sets two things apart ("what's the difference
 * between"). */
static int how_or_why(const side *sd)
{
    if (sd->nt < 2) return 0;
    const tok *t = &sd->t[0], *u = &sd->t[1];
    if (is_word(t, "why")) return 1;
    /* "what's the difference between x and y": an explanation */
    if (is_word(t, "what") && place_of(sd, "difference") > 0 && place_of(sd, "between") > 0)
        return 1;
    if (!is_word(t, "how")) return 0;
    return word_is(u, K_HOWQTY) || ((is_do(u) || is_word(u, "can") || is_word(u, "should")) &&
                                    sd->nt > 2 && (sd->t[2].flags & F_STOP));
}

/* "Can cats eat tuna?" vs "How much tuna can cats eat?", "Should I refinance?" vs "How do
 * I refinance?": a yes or no against an amount, a way or a reason. */
static int rule_yes_no(const side *a, const side *b, char *why, size_t whylen)
{
    if ((yes_no(a) && how_or_why(b)) || (yes_no(b) && how_or_why(a))) {
        const tok *x = &a->t[0], *y = &b->t[0];
        say(why, whylen, "question differs: %.*s vs %.*s", (int)x->len, x->s, (int)y->len, y->s);
        return 0;
    }
    return 1;
}

/* "Can I sue my employer?" vs "Can my employer sue me?", "How much do I owe the IRS?" vs
 * "How much does the IRS owe me?": the asker before a verb on one side, after it on the
 * other, who does it and who undergoes it traded. */
static int rule_pronoun_roles(const side *a, const side *b, char *why, size_t whylen)
{
    for (int pass = 0; pass < 2; pass++) {
        const side *p = pass ? b : a, *q = pass ? a : b;
        int ip = place_of(p, "i"), mq = place_of(q, "me"), iq = place_of(q, "i");
        /* (an "I" after the "me" that a subordinator opens is of another clause: "give me
         * notice before I move") */
        const tok *opens = iq > 0 ? &q->t[iq - 1] : NULL;
        int clause = opens && iq > mq &&
                     (word_is(opens, K_SUBORD) || is_word(opens, "before") ||
                      is_word(opens, "after") || is_word(opens, "because"));
        if (ip < 0 || mq < 0 || place_of(p, "me") >= 0 || (iq >= 0 && !clause)) continue;
        /* "the intake for me", "explain to me": the asker served, not acted on */
        const tok *before = mq > 0 ? &q->t[mq - 1] : NULL;
        if (before && (is_word(before, "for") || is_word(before, "to") ||
                       is_word(before, "with")))
            continue;
        for (int v = 0; v < mq; v++) {
            const tok *t = &q->t[v];
            if (t->flags & (F_STOP | F_NUM | F_NEG)) continue;
            for (int k = ip + 1; k < p->nt; k++)
                if (tok_like(&p->t[k], t)) {
                    say(why, whylen, "roles reversed: I ... %.*s vs %.*s ... me", (int)t->len,
                        t->s, (int)t->len, t->s);
                    return 0;
                }
        }
    }
    return 1;
}

static int participle(const tok *t);
static int verb_forms(const tok *x, const tok *y);

/* The verb "how do I" asks of, its index ("how do I sue my landlord": "sue"), or -1. */
static int asked_verb(const side *sd)
{
    if (!asks_how_to(sd)) return -1;
    int i = place_of(sd, "i");
    if (i < 0 || i > 3 || i + 1 >= sd->nt ||
        (sd->t[i + 1].flags & (F_STOP | F_NUM | F_NEG | F_ENTITY)))
        return -1; /* (not one after a verb of phrasing: "how should I explain divorce") */
    return i + 1;
}

/* "How do I sue my landlord?" vs "How do I respond to my landlord suing me?", "How do I hire
 * a photographer?" vs "How do I get hired as a photographer?": what the asker does to
 * another on one side is done to the asker on the other (the verb with "me" after it, or
 * in the passive: "get hired", "being served", "was reported"). */
static int rule_done_to_me(const side *a, const side *b, char *why, size_t whylen)
{
    static const char *const passive[] = {"get", "got", "getting", "gets", "being", "been",
                                          "be", "was", "were", "am", "is"};
    for (int pass = 0; pass < 2; pass++) {
        const side *p = pass ? b : a, *q = pass ? a : b;
        int v = asked_verb(p);
        if (v < 0 || place_of(p, "me") >= 0 || place_of(p, "myself") >= 0) continue;
        const tok *verb = &p->t[v];
        for (int j = 0; j < q->nt; j++) {
            if (!verb_forms(&q->t[j], verb) || (j > 0 && is_word(&q->t[j - 1], "i"))) continue;
            int done = 0;
            for (int k = j + 1; k < q->nt && k <= j + 4 && !done; k++)
                done = is_word(&q->t[k], "me");
            /* the passive of the asker ("I get hired", "I was reported", "after being
             * served"), not of a thing ("how can two dicts be merged", "a dog that was
             * trained badly") */
            static const char *const gerunds[] = {"being", "getting"};
            static const char *const leads[] = {"after", "about", "from", "of", "for", "before"};
            const tok *aux = j > 0 ? &q->t[j - 1] : NULL, *subj = j > 1 ? &q->t[j - 2] : NULL;
            int asker = subj && (is_word(subj, "i") ||
                                 (ONE_OF(aux, gerunds) && place_of(q, "i") >= 0 &&
                                  ONE_OF(subj, leads)));
            done = done || (asker && ONE_OF(aux, passive) && participle(&q->t[j]));
            /* (what p says too is no role of its own) */
            for (int k = 1; k < p->nt && done; k++)
                done = !(tok_eq(&p->t[k], &q->t[j]) && tok_eq(&p->t[k - 1], &q->t[j - 1]));
            if (!done) continue;
            say(why, whylen, "roles reversed: I %.*s vs %.*s (to) me", (int)verb->len, verb->s,
                (int)q->t[j].len, q->t[j].s);
            return 0;
        }
    }
    return 1;
}

/* The subject a question's auxiliary opens on ("how much notice does a tenant have to
 * give": "tenant"): the first content word after a do, can, should, is... among its first
 * six words; -1. */
static int aux_subject(const side *sd)
{
    static const char *const aux[] = {"do",  "does", "did",   "can",  "could", "should",
                                      "is",  "are",  "was",   "were", "will",  "would",
                                      "must", "may", "might"};
    for (int i = 0; i < sd->nt && i < 6; i++)
        if (ONE_OF(&sd->t[i], aux)) {
            for (int j = i + 1; j < sd->nt; j++) {
                if (sd->t[j].flags & (F_NUM | F_NEG)) return -1;
                if (!(sd->t[j].flags & F_STOP)) return j;
            }
            return -1;
        }
    return -1;
}

/* "How much notice does a tenant have to give?" vs "How much notice does a landlord have
 * to give a tenant?": the auxiliary's subjects, opposites, though each side names both. */
static int rule_subjects(const side *a, const side *b, char *why, size_t whylen)
{
    int i = aux_subject(a), j = aux_subject(b);
    if (i < 0 || j < 0 || (i + 1 < a->nt && word_is(&a->t[i + 1], K_JOIN)) ||
        (j + 1 < b->nt && word_is(&b->t[j + 1], K_JOIN)))
        return 1; /* (a choice is the choice rule's: "does the buyer or the seller pay") */
    const tok *x = &a->t[i], *y = &b->t[j];
    if (x->lex < 0 || y->lex < 0 || tok_eq(x, y) || syn(x, y) ||
        !lex_share(x->lex, y->lex, K_CONTRAST))
        return 1;
    say(why, whylen, "subjects differ: %.*s vs %.*s", (int)x->len, x->s, (int)y->len, y->s);
    return 0;
}

/* "Can my manager read my emails?" vs "Can I read my manager's emails?": one side's "I"
 * acts on what belongs to "my X", the other's "my X" acts on what is the asker's. */
static int rule_owner_roles(const side *a, const side *b, char *why, size_t whylen)
{
    for (int pass = 0; pass < 2; pass++) {
        const side *p = pass ? b : a, *q = pass ? a : b;
        int ip = place_of(p, "i");
        if (ip < 0 || place_of(q, "i") >= 0) continue;
        for (int k = ip + 2; k < p->nt; k++) {
            if (!is_word(&p->t[k - 1], "my") || !owns(p, k)) continue;
            /* q: "my X" before another "my", X not owning there */
            for (int j = 1; j < q->nt; j++) {
                if (!is_word(&q->t[j - 1], "my") || !tok_eq(&q->t[j], &p->t[k]) || owns(q, j))
                    continue;
                int later = 0;
                for (int m = j + 1; m < q->nt && !later; m++)
                    later = is_word(&q->t[m], "my") || is_word(&q->t[m], "me");
                if (!later) continue;
                say(why, whylen, "roles reversed: I ... my %.*s's vs my %.*s ... my",
                    (int)p->t[k].len, p->t[k].s, (int)q->t[j].len, q->t[j].s);
                return 0;
            }
        }
    }
    return 1;
}

/* The subject of the verb at sd->t[end], as far as word order tells: the first content word
 * after the first auxiliary ("did Brutus kill", "what port does HTTPS use"), else the first
 * before the verb; -1 when none. */
static int subject_of(const side *sd, int end)
{
    int aux = 0;
    while (aux < end && !word_is(&sd->t[aux], K_NOW) && !word_is(&sd->t[aux], K_PAST) &&
           !is_word(&sd->t[aux], "get") && !is_word(&sd->t[aux], "got"))
        aux++;
    for (int from = aux < end ? aux + 1 : 0;; from = 0) {
        for (int i = from; i < end; i++)
            if (!(sd->t[i].flags & (F_STOP | F_NUM | F_NEG))) return i;
        if (!from) return -1;
    }
}

/* Whether t reads as a participle: "killed", "beaten", "bought". */
static int participle(const tok *t)
{
    unsigned f;
    if (lex_verb(lex_find(t->s, t->len), &f) >= 0 && (f & (3u << 3))) return 1;
    return t->len > 4 && (!memcmp(t->s + t->len - 2, "ed", 2) ||
                          !memcmp(t->s + t->len - 2, "en", 2));
}

/* Whether x and y are forms of one verb: "kill" and "killed", "beat" and "beaten". */
static int verb_forms(const tok *x, const tok *y)
{
    unsigned fx, fy;
    int vx = lex_verb(lex_find(x->s, x->len), &fx);
    if (vx >= 0 && vx == lex_verb(lex_find(y->s, y->len), &fy)) return 1;
    const tok *l = x->len > y->len ? x : y, *r = l == x ? y : x; /* "beat", "beaten" */
    return tok_eq(x, y) || inflected(x->s, x->len, y->s, y->len) ||
           inflected(y->s, y->len, x->s, x->len) ||
           (l->len == r->len + 2 && !memcmp(l->s, r->s, r->len) &&
            !memcmp(l->s + r->len, "en", 2));
}

/* "Did Brutus kill Caesar?" vs "Was Brutus killed by Caesar?": the same doer first, once in
 * the active and once in the passive, is the other way round. */
static int rule_passive(const side *a, const side *b, char *why, size_t whylen)
{
    for (int pass = 0; pass < 2; pass++) {
        const side *p = pass ? b : a, *q = pass ? a : b;
        int kb = place_of(q, "by");
        if (kb < 2 || place_of(p, "by") >= 0) continue;
        int vq = kb - 1;
        if ((q->t[vq].flags & (F_STOP | F_NUM)) || !participle(&q->t[vq])) continue;
        for (int vp = 1; vp < p->nt; vp++) {
            if (!verb_forms(&p->t[vp], &q->t[vq])) continue;
            int sp = subject_of(p, vp), sq = subject_of(q, vq);
            if (sp < 0 || sq < 0 || !tok_like(&p->t[sp], &q->t[sq])) break;
            say(why, whylen, "roles reversed: %.*s %.*s vs %.*s %.*s by", (int)p->t[sp].len,
                p->t[sp].s, (int)p->t[vp].len, p->t[vp].s, (int)q->t[sq].len, q->t[sq].s,
                (int)q->t[vq].len, q->t[vq].s);
            return 0;
        }
    }
    return 1;
}

static int every_other(const side *sd, int i)
{
    return i + 1 < sd->nt && is_word(&sd->t[i], "every") && is_word(&sd->t[i + 1], "other");
}

/* The length of a plural's singular, or 0: "rows" is a word of the lexicon too, and so is
 * not read as one. */
static size_t plural_sl(const tok *n)
{
    if (n->nlen < n->len) return n->nlen;
    return n->len > 3 && n->s[n->len - 1] == 's' && n->s[n->len - 2] != 's' ? n->len - 1u : 0;
}

/* "multiple files", "several rows": many of a thing (not "how many", a question). */
static int many_word(const side *sd, int i)
{
    const tok *t = &sd->t[i];
    if (is_word(t, "many"))
        return !(i > 0 && (is_word(&t[-1], "how") || is_word(&t[-1], "so") ||
                           is_word(&t[-1], "too") || is_word(&t[-1], "as")));
    return is_word(t, "multiple") || is_word(t, "several") || is_word(t, "numerous") ||
           is_word(t, "various");
}

/* "Is a tomato a fruit or a vegetable?" vs "Is a tomato a fruit?": a choice between two
 * against one of them asked alone. 1 when p's "or" at i offers a thing before it and one
 * right after it (their places into *x, *y), and q says only one of the two, with no "or",
 * "vs" or "versus" of its own. */
static int choice_dropped(const side *p, int i, const side *q, int *xp, int *yp)
{
    if (!is_word(&p->t[i], "or") || place_of(q, "or") >= 0 || place_of(q, "vs") >= 0 ||
        place_of(q, "versus") >= 0)
        return 0;
    int x = *xp = content_near(p, i, -1), y = *yp = content_near(p, i, +1);
    /* (a thing right after the "or", not a clause: "or are they poisonous") */
    if (x < 0 || y < 0 || y > i + 2 || (y == i + 2 && !(p->t[i + 1].flags & F_DROP)) ||
        (p->t[y].flags & F_NEG)) /* (nor "or not") */
        return 0;
    int hx = side_has_like(q, &p->t[x]) || side_has_syn(q, &p->t[x]);
    int hy = side_has_like(q, &p->t[y]) || side_has_syn(q, &p->t[y]);
    return hx != hy; /* (either one of the two) */
}

/* Whether sd asks how often: "every day", "daily", "each night". */
static int says_often(const side *sd)
{
    static const char *const w[] = {"daily", "nightly", "weekly", "everyday", "regularly"};
    for (int i = 0; i < sd->nt; i++) {
        if (ONE_OF(&sd->t[i], w)) return 1;
        int j = i + 1 < sd->nt && (is_word(&sd->t[i + 1], "single") ||
                                   is_word(&sd->t[i + 1], "other"))
                    ? i + 2
                    : i + 1; /* ("every other day" is the scope rule's) */
        if ((is_word(&sd->t[i], "every") || is_word(&sd->t[i], "each")) && j < sd->nt &&
            word_is(&sd->t[j], K_TIMENOUN))
            return 1;
    }
    return 0;
}

/* Whether sd counts per a time or a person: "per month", "a year", "per person",
 * "annually", "monthly"; a day only where days: 1 (how much to eat or drink is a day's
 * unsaid, as sleep is a night's; nor is "a quarter cup" a time). */
static int says_rate(const side *sd, int days)
{
    static const char *const w[] = {"weekly", "monthly", "yearly", "annually", "annual",
                                    "hourly"};
    for (int i = 0; i < sd->nt; i++) {
        const tok *t = &sd->t[i], *u = i + 1 < sd->nt ? &sd->t[i + 1] : NULL;
        if (ONE_OF(t, w) || (days && is_word(t, "daily"))) return 1;
        if (u &&
            (is_word(t, "per") || is_word(t, "a") || is_word(t, "an") || is_word(t, "each") ||
             is_word(t, "every")) &&
            ((word_is(u, K_TIMENOUN) && !is_word(u, "night") && (days || !is_word(u, "day")) &&
              (!is_word(u, "quarter") || is_word(t, "per"))) ||
             is_word(u, "person") || is_word(u, "head")))
            return 1;
    }
    return 0;
}

/* Whether sd asks an amount: 2 a cost or a price, 1 another "how much" or "how many". */
static int asks_amount(const side *sd)
{
    int how = 0;
    for (int i = 0; i < sd->nt; i++) {
        const tok *t = &sd->t[i];
        if (is_word(t, "cost") || is_word(t, "costs") || is_word(t, "price")) return 2;
        how |= is_word(t, "how") && i + 1 < sd->nt &&
               (is_word(&sd->t[i + 1], "much") || is_word(&sd->t[i + 1], "many"));
    }
    return how;
}

/* Whether sd asks the whole a percentage is of: "80 is 15% of what number", "of what". */
static int asks_whole(const side *sd)
{
    if (place_of(sd, "percent") < 0) return 0;
    for (int i = 0; i + 1 < sd->nt; i++)
        if (is_word(&sd->t[i], "of") && is_word(&sd->t[i + 1], "what") &&
            (i + 2 == sd->nt || is_word(&sd->t[i + 2], "number") ||
             is_word(&sd->t[i + 2], "value") || is_word(&sd->t[i + 2], "amount")))
            return 1;
    return 0;
}

/* "What is 15% of 80?" vs "80 is 15% of what number?": the share asked, or the whole. */
static int rule_whole(const side *a, const side *b, char *why, size_t whylen)
{
    int wa = asks_whole(a);
    if (wa == asks_whole(b)) return 1;
    say(why, whylen, "asks the whole in %s only", wa ? "stored" : "query");
    return 0;
}

/* Whether one of sd's words begins with y's first five letters, or y with its. */
static int shares_root(const side *sd, const tok *y)
{
    for (int i = 0; i < sd->nt; i++) {
        const tok *t = &sd->t[i];
        if (t->len >= 5 && y->len >= 5 && !memcmp(t->s, y->s, 5)) return 1;
    }
    return 0;
}

/* Whether t reads as a superlative: "fastest", "healthiest" (not "best", a word of
 * phrasing, nor the words that end so: "interest", "harvest"). */
static int superlative(const tok *t)
{
    static const char *const not_one[] = {"interest", "honest",  "forest",  "modest",
                                          "harvest",  "request", "contest", "protest",
                                          "suggest",  "digest",  "invest",  "arrest",
                                          "manifest", "earnest", "priest",  "conquest",
                                          "inquest",  "bequest", "tempest", "southwest",
                                          "northwest", "midwest", "unrest", "pretest",
                                          "ingest",   "attest",  "detest",  "infest",
                                          "divest",   "retest",  "pytest",  "unittest",
                                          "behest",   "congest", "jest"};
    if (t->len < 6 || memcmp(t->s + t->len - 3, "est", 3) || (t->flags & (F_STOP | F_NUM)))
        return 0;
    return !ONE_OF(t, not_one);
}

/* "What is the fastest way to sort a list?" vs "What is the most memory efficient way to
 * sort a list?": a superlative on one side, "most" and another word on the other. */
static int rule_superlative(const side *a, const side *b, char *why, size_t whylen)
{
    for (int pass = 0; pass < 2; pass++) {
        const side *p = pass ? b : a, *q = pass ? a : b;
        for (int i = 0; i < p->nt; i++) {
            const tok *x = &p->t[i];
            if (!superlative(x) || side_has_like(q, x) || side_has_syn(q, x)) continue;
            for (int j = 0; j + 1 < q->nt; j++) {
                const tok *y = &q->t[j + 1];
                if (!is_word(&q->t[j], "most") || (y->flags & (F_STOP | F_NUM)) ||
                    side_has_like(p, y) || syn(x, y) || shares_root(p, y) ||
                    ((is_word(x, "fastest") || is_word(x, "quickest")) &&
                     is_word(y, "efficient")))
                    continue; /* ("the largest population", "the most populous") */
                say(why, whylen, "another superlative: %.*s vs most %.*s", (int)x->len, x->s,
                    (int)y->len, y->s);
                return 0;
            }
        }
    }
    return 1;
}

/* "How much does Netflix cost?" vs "How much does Netflix cost per year?": an amount asked
 * per a time or a person on one side only, a number the other does not ask. */
static int rule_rate(const side *a, const side *b, char *why, size_t whylen)
{
    int aa = asks_amount(a), ab = asks_amount(b), days = aa == 2 || ab == 2;
    if (!aa || !ab || says_rate(a, days) == says_rate(b, days)) return 1;
    say(why, whylen, "a rate in %s only", says_rate(a, days) ? "stored" : "query");
    return 0;
}

/* A word that says how many of a kind a yes or no is asked of: "do all birds fly". */
static int quantifier(const tok *t)
{
    static const char *const w[] = {"all", "most", "only", "few", "many"};
    return ONE_OF(t, w);
}

/* Whether sd asks of an excess: "too" before a measure ("how much vitamin D is too much",
 * "is 30 minutes too long"). */
static int asks_excess(const side *sd)
{
    static const char *const measures[] = {"much", "many", "long", "often", "high", "low",
                                           "hot",  "cold", "big",  "small", "far"};
    for (int i = 0; i + 1 < sd->nt; i++)
        if (is_word(&sd->t[i], "too") && ONE_OF(&sd->t[i + 1], measures)) return 1;
    return 0;
}

/* Whether sd names a limit: the other way to ask of an excess ("the maximum safe dose"). */
static int names_limit(const side *sd)
{
    static const char *const limits[] = {"max",       "maximum", "limit", "limits", "upper",
                                         "overdose",  "excess",  "excessive", "safe", "safely",
                                         "toxic",     "most",    "too"};
    return SAYS_ONE_OF(sd, limits);
}

/* "How much vitamin D should I take" asks a dose, "how much vitamin D is too much" where the
 * harm starts: an excess asked on one side only, the other naming no limit. */
static int rule_excess(const side *a, const side *b, char *why, size_t whylen)
{
    for (int pass = 0; pass < 2; pass++) {
        const side *p = pass ? b : a, *q = pass ? a : b;
        if (asks_excess(p) && !names_limit(q)) {
            say(why, whylen, "asks an excess: %s only", pass ? "query" : "stored");
            return 0;
        }
    }
    return 1;
}

static int rule_scope(const side *a, const side *b, char *why, size_t whylen)
{
    const int yes_nos = yes_no(a) && yes_no(b), often[2] = {says_often(a), says_often(b)};
    for (int pass = 0; pass < 2; pass++) {
        const side *p = pass ? b : a, *q = pass ? a : b;
        int x, y;
        for (int i = 1; i + 1 < p->nt; i++)
            if (choice_dropped(p, i, q, &x, &y)) {
                say(why, whylen, "a choice vs one: %.*s or %.*s", (int)p->t[x].len,
                    p->t[x].s, (int)p->t[y].len, p->t[y].s);
                return 0;
            }
        /* "can cats eat tuna" vs "can cats eat tuna every day": how often */
        if (often[pass] && !often[!pass] && yes_nos) {
            say(why, whylen, "how often in %s only", pass ? "query" : "stored");
            return 0;
        }
        /* "Do birds fly?" vs "Do all birds fly?", "Are most snakes venomous?" */
        int qq = 0;
        for (int k = 0; k < q->nt; k++)
            qq |= quantifier(&q->t[k]) || word_is(&q->t[k], K_ALL); /* (every square) */
        for (int i = 1; i + 1 < p->nt && !qq && yes_nos; i++)
            if (quantifier(&p->t[i]) && /* (not "all right", "after all") */
                !(is_word(&p->t[i], "all") && (is_word(&p->t[i + 1], "right") ||
                                                is_word(&p->t[i - 1], "after")))) {
                say(why, whylen, "scope differs: %.*s in %s only", (int)p->t[i].len,
                    p->t[i].s, pass ? "query" : "stored");
                return 0;
            }
    }
    /* "every other day" is half of "every day", "every other row" half of "a row" */
    int ea = 0, eb = 0, oa = 0, ob = 0;
    for (int i = 0; i < a->nt; i++)
        ea += is_word(&a->t[i], "every"), oa += every_other(a, i);
    for (int i = 0; i < b->nt; i++)
        eb += is_word(&b->t[i], "every"), ob += every_other(b, i);
    if (oa != ob) {
        const char *other = ea && eb ? "every" : "not every other";
        say(why, whylen, "scope differs: %s vs %s", oa > ob ? "every other" : other,
            oa > ob ? other : "every other");
        return 0;
    }
    int sa = 0, sb = 0; /* bit 0: one, bit 1: all */
    for (int i = 0; i < a->nt; i++)
        sa |= word_is(&a->t[i], K_ONE) | word_is(&a->t[i], K_ALL) << 1;
    for (int i = 0; i < b->nt; i++)
        sb |= word_is(&b->t[i], K_ONE) | word_is(&b->t[i], K_ALL) << 1;
    if ((sa == 1 && sb == 2) || (sa == 2 && sb == 1)) {
        say(why, whylen, "scope differs: %s vs %s", sa == 1 ? "one" : "all",
            sb == 1 ? "one" : "all");
        return 0;
    }
    /* "rename a file" vs "rename all files" or "multiple files": all or many of a plural
     * the other side says once */
    for (int pass = 0; pass < 2; pass++) {
        const side *p = pass ? b : a, *q = pass ? a : b;
        if (pass ? sa : sb) continue;
        for (int i = 0; i + 1 < p->nt; i++) {
            if (!((word_is(&p->t[i], K_ALL) && (pass ? sb : sa)) ||
                  (many_word(p, i) && !side_has(q, &p->t[i]))))
                continue;
            /* its noun: "all files", "all Docker containers", "all running Docker
             * containers" */
            int r = content_near(p, i, +1);
            for (int hop = 0; hop < 3 && r >= 0 && r + 1 < p->nt && !plural_sl(&p->t[r]) &&
                              !(p->t[r + 1].flags & F_STOP);
                 hop++)
                r++;
            const tok *n = r >= 0 ? &p->t[r] : NULL;
            size_t sl = n ? plural_sl(n) : 0;
            if (!sl) continue; /* not a plural */
            for (int k = 0; k < q->nt; k++)
                if (q->t[k].len == q->t[k].nlen && q->t[k].nlen == sl &&
                    !memcmp(q->t[k].n, n->nlen < n->len ? n->n : n->s, sl) &&
                    /* not a noun's modifier: "column widths", "duplicate items" */
                    (k + 1 == q->nt || (q->t[k + 1].flags & (F_STOP | F_NUM)))) {
                    say(why, whylen, "scope differs: %.*s %.*s vs one", (int)p->t[i].len,
                        p->t[i].s, (int)n->len, n->s);
                    return 0;
                }
        }
    }
    return 1;
}

/* Whether t is the comparative of adjective w in -er ("healthier" of "healthy", "safer" of
 * "safe", "cheaper" of "cheap"). */
static int comparative_of(const tok *t, const tok *w)
{
    const char *c = t->s, *a = w->s;
    size_t n = t->len, m = w->len;
    if (m < 3 || n < m + 1 || memcmp(c + n - 2, "er", 2)) return 0;
    if (a[m - 1] == 'y') return n == m + 2 && !memcmp(c, a, m - 1) && c[m - 1] == 'i';
    if (a[m - 1] == 'e') return n == m + 1 && !memcmp(c, a, m);
    return n == m + 2 && !memcmp(c, a, m);
}

/* How often sd says the word x, as it is written but for case. */
static int times_said(const side *sd, const tok *x)
{
    int n = 0;
    for (int i = 0; i < sd->nt; i++)
        n += sd->t[i].len == x->len && !memcmp(sd->t[i].s, x->s, x->len);
    return n;
}

/* How many of sd's words are like x (a misspelling of it too). */
static int times_like(const side *sd, const tok *x)
{
    int n = 0;
    for (int i = 0; i < sd->nt; i++)
        n += tok_like(&sd->t[i], x);
    return n;
}

/* "a will and a living trust" vs "a living will and a living trust": the same words, one of
 * them said once more, where it makes another thing of the word it stands by. */
static int rule_said_again(const side *a, const side *b, char *why, size_t whylen)
{
    if (!words_within(a, b) || !words_within(b, a)) return 1;
    for (int pass = 0; pass < 2; pass++) {
        const side *p = pass ? b : a, *q = pass ? a : b;
        for (int i = 0; i + 1 < p->nt; i++) {
            const tok *x = &p->t[i];
            const tok *w = &p->t[i + 1];
            /* (a name said again qualifies each thing alike: "git merge vs rebase" and "git
             * rebase vs git merge") */
            if ((x->flags & (F_STOP | F_NUM | F_NEG | F_ENTITY | F_CAP | F_ACRO)) ||
                tool_name(x) || maker(x) || (w->flags & F_NUM) ||
                times_said(p, x) <= times_like(q, x) || !times_said(q, x) ||
                times_said(p, w) != times_said(q, w))
                continue;
            /* (q says the word it stands by without it; a function word only as a noun:
             * "a will") */
            int bare = 0;
            for (int j = 1; j < q->nt && !bare; j++)
                bare = tok_eq(&q->t[j], w) && !tok_eq(&q->t[j - 1], x) &&
                       (!(w->flags & F_STOP) || is_word(&q->t[j - 1], "a") ||
                        is_word(&q->t[j - 1], "the"));
            if (!bare) continue;
            say(why, whylen, "\"%.*s\" said more often in %s", (int)x->len, x->s,
                pass ? "query" : "stored");
            return 0;
        }
    }
    return 1;
}

/* "Tell me another joke" against "tell me a joke": one not given before is asked for (but
 * "another word for happy" is a synonym, "another language" a new one, "into another" a
 * pronoun). */
static int rule_another(const side *a, const side *b, char *why, size_t whylen)
{
    static const char *const other[] = {"another", "other", "else", "new", "different",
                                        "more", "next"};
    static const char *const idiom[] = {"word", "words", "name", "term", "way", "synonym"};
    for (int pass = 0; pass < 2; pass++) {
        const side *p = pass ? b : a, *q = pass ? a : b;
        int others = SAYS_ONE_OF(q, other);
        for (int i = 0; i + 1 < p->nt && !others; i++) {
            const tok *n = &p->t[i + 1];
            if (!is_word(&p->t[i], "another") || (n->flags & (F_STOP | F_NUM))) continue;
            if (ONE_OF(n, idiom) || !side_has_like(q, n)) continue;
            say(why, whylen, "asks for another %.*s", (int)n->len, n->s);
            return 0;
        }
    }
    return 1;
}

/* "less healthy" on one side where the other says "healthier": the comparison flipped
 * ("which is healthier, brown or white rice" vs "which is less healthy"). */
static int rule_less(const side *a, const side *b, char *why, size_t whylen)
{
    for (int pass = 0; pass < 2; pass++) {
        const side *x = pass ? b : a, *y = pass ? a : b;
        for (int i = 0; i + 1 < x->nt; i++) {
            if (!is_word(&x->t[i], "less") && !is_word(&x->t[i], "fewer")) continue;
            for (int j = 0; j < y->nt; j++)
                if (comparative_of(&y->t[j], &x->t[i + 1]) &&
                    !(j > 0 && (is_word(&y->t[j - 1], "less") || is_word(&y->t[j - 1], "no")))) {
                    say(why, whylen, "\"less %.*s\" vs \"%.*s\"", (int)x->t[i + 1].len,
                        x->t[i + 1].s, (int)y->t[j].len, y->t[j].s);
                    return 0;
                }
        }
    }
    return 1;
}

/* "LA" on one side where the other spells out "Los Angeles": the words spelled out, as
 * many as the capitals and each beginning with its letter, become the abbreviation (also
 * "NYC", "EU", "BP"; "US" and "UK" tokenize() merges alone). A token of side p's buffer
 * goes into q: both live until the pair is checked. */
static void spelled_as_abbreviations(const side *p, side *q)
{
    for (int i = 0; i < p->nt; i++) {
        const tok *x = &p->t[i];
        /* in capitals, or typed in lower case ("nyc") against a name in capitals */
        int lower = !(x->flags & (F_ACRO | F_STOP)) && x->lex < 0 && x->len <= 4;
        if (!((x->flags & F_ACRO) || lower) || x->len < 2 || x->len > 5) continue;
        int letters = 1;
        for (size_t k = 0; k < x->len; k++)
            letters &= is_alpha((unsigned char)x->s[k]);
        int found = 0;
        for (int j = 0; j < q->nt && !found; j++)
            found = tok_eq(x, &q->t[j]);
        if (!letters || found) continue;
        for (int j = 0; j < q->nt; j++) {
            size_t k = 0;
            int e = j;
            for (; e < q->nt && k < x->len; e++) {
                const tok *u = &q->t[e];
                if (k > 0 && acronym_glue(u)) continue;
                if (u->s[0] != x->s[k] || (u->flags & (F_STOP | F_NUM | F_ACRO)) ||
                    u->len < 2 || (lower && !(u->flags & F_UPFIRST)))
                    break;
                k++;
            }
            /* "NYC" is "New York" too: the city's C left to be understood (only there:
             * "NBC" is no "New Balance") */
            int city = k + 1 == x->len && x->len == 3 && !memcmp(x->s, "nyc", 3);
            if (k != x->len && !city) continue;
            tok merged = *x;
            merged.flags = (uint16_t)((x->flags & ~(unsigned)(F_INITIAL | F_QUOTED)) |
                                      (q->t[j].flags & (F_INITIAL | F_QUOTED)));
            q->t[j] = merged;
            memmove(&q->t[j + 1], &q->t[e], sizeof *q->t * (size_t)(q->nt - e));
            q->nt -= e - j - 1;
            break;
        }
    }
}

/* Both texts tokenized (NULL reads as empty); 0, saying so, when either is too long. */
static int read_pair(side *a, side *b, const char *stored, size_t slen, const char *query,
                     size_t qlen, char *why, size_t whylen)
{
    pthread_once(&lex_once, lex_build);
    say(why, whylen, "%s", "");
    tokenize(a, stored ? stored : "", stored ? slen : 0);
    tokenize(b, query ? query : "", query ? qlen : 0);
    if (a->overflow || b->overflow) {
        say(why, whylen, "too long to check");
        return 0;
    }
    spelled_as_abbreviations(a, b);
    spelled_as_abbreviations(b, a);
    return 1;
}

/* The words of the place a preposition at sd->t[i] names: its content words and numbers
 * after it, past determiners ("from my iPhone"), up to the next function word; at most 4,
 * their indexes into out. None for "from biting" (stop it from biting: no place) or a "to"
 * that no determiner, name or number follows ("how to remove", "get my dog to stop": an
 * infinitive, as often as not). */
static int place_words(const side *sd, int i, int *out)
{
    if (i + 1 >= sd->nt) return 0;
    const tok *next = &sd->t[i + 1];
    if (next->len > 4 && !memcmp(next->s + next->len - 3, "ing", 3)) return 0;
    if (!is_word(&sd->t[i], "from") && !(next->flags & F_DROP) && !(next->flags & (F_ENTITY | F_NUM)))
        return 0;
    int n = 0;
    for (int j = i + 1; j < sd->nt && n < 4; j++) {
        const tok *t = &sd->t[j];
        if (t->flags & F_DROP) continue; /* an article, a possessive */
        if ((t->flags & F_STOP) && !(t->flags & (F_NUM | F_ENTITY))) break;
        out[n++] = j;
    }
    return n;
}

/* Whether a word of p's place (its indexes pi) is like one of q's places (from or to). */
static int place_shared(const side *p, const int *pi, int pn, const side *q, int to)
{
    for (int i = 0; i < q->nt; i++) {
        int into = is_word(&q->t[i], "to") || is_word(&q->t[i], "into") ||
                   is_word(&q->t[i], "onto");
        if (!(to ? into : is_word(&q->t[i], "from"))) continue;
        int qi[4], qn = place_words(q, i, qi);
        for (int k = 0; k < pn; k++)
            for (int l = 0; l < qn; l++)
                if (tok_like(&p->t[pi[k]], &q->t[qi[l]])) return 1;
    }
    return 0;
}

/* "copy a file from the container to the host" vs "from the host into the container",
 * "flights to Paris" vs "flights from Paris": what one side moves from, the other moves to
 * (and not from). */
static int rule_direction(const side *a, const side *b, char *why, size_t whylen)
{
    for (int pass = 0; pass < 2; pass++) {
        const side *p = pass ? b : a, *q = pass ? a : b;
        for (int i = 0; i < p->nt; i++) {
            if (!is_word(&p->t[i], "from")) continue;
            int pi[4], pn = place_words(p, i, pi);
            if (pn && place_shared(p, pi, pn, q, 1) && !place_shared(p, pi, pn, q, 0)) {
                say(why, whylen, "direction differs: from %.*s in %s, to it in %s",
                    (int)p->t[pi[0]].len, p->t[pi[0]].s, pass ? "query" : "stored",
                    pass ? "stored" : "query");
                return 0;
            }
        }
    }
    return 1;
}

/* What a question about a word or phrase asks of it, as bits: 1 its meaning, 2 its origin,
 * 4 its opposite, 8 a synonym, 16 its pronunciation, 32 its plural, 64 its spelling. */
static unsigned word_aspects(const side *sd)
{
    static const struct {
        const char *w;
        unsigned bit;
    } of[] = {{"mean", 1},        {"means", 1},      {"meaning", 1},   {"meanings", 1},
              {"definition", 1},  {"define", 1},     {"origin", 2},    {"origins", 2},
              {"etymology", 2},   {"coined", 2},     {"derived", 2},   {"opposite", 4},
              {"antonym", 4},     {"antonyms", 4},   {"synonym", 8},   {"synonyms", 8},
              {"pronounce", 16},  {"pronounced", 16}, {"pronunciation", 16},
              {"plural", 32},     {"spell", 64},     {"spelling", 64}, {"spelled", 64}};
    unsigned bits = 0;
    for (int i = 0; i < sd->nt; i++) {
        for (size_t k = 0; k < sizeof of / sizeof *of; k++)
            if (is_word(&sd->t[i], of[k].w)) bits |= of[k].bit;
        /* "where does the phrase come from" */
        if (i + 1 < sd->nt && is_word(&sd->t[i + 1], "from") &&
            (is_word(&sd->t[i], "come") || is_word(&sd->t[i], "comes") ||
             is_word(&sd->t[i], "came")))
            bits |= 2;
    }
    return bits;
}

/* "What does 'carpe diem' mean?" vs "Where does 'carpe diem' come from?", "the meaning of
 * ephemeral" vs "the opposite of ephemeral": two things asked of one word. */
static int rule_word_aspect(const side *a, const side *b, char *why, size_t whylen)
{
    unsigned x = word_aspects(a), y = word_aspects(b);
    if (!x || !y || (x & y)) return 1;
    static const char *const names[] = {"meaning", "origin",        "opposite", "synonym",
                                        "pronunciation", "plural", "spelling"};
    int i = __builtin_ctz(x), j = __builtin_ctz(y);
    say(why, whylen, "asks another thing of the word: %s vs %s", names[i], names[j]);
    return 0;
}

/* The two things "between" names ("the difference between speed and velocity"): 1 with
 * their indexes when its content words after it are two, else 0. */
static int between_pair(const side *sd, int out[2])
{
    for (int i = 0; i < sd->nt; i++) {
        if (!is_word(&sd->t[i], "between")) continue;
        int n = 0;
        for (int j = i + 1; j < sd->nt; j++)
            if (!(sd->t[j].flags & (F_STOP | F_NUM)) && !is_word(&sd->t[j], "vs") &&
                !is_word(&sd->t[j], "versus") && n++ < 2)
                out[n - 1] = j;
        return n == 2;
    }
    return 0;
}

/* "the difference between speed and velocity" vs "between velocity and acceleration": two
 * things compared, not the same two. */
static int rule_between(const side *a, const side *b, char *why, size_t whylen)
{
    int pa[2], pb[2];
    if (!between_pair(a, pa) || !between_pair(b, pb)) return 1;
    for (int pass = 0; pass < 2; pass++) {
        const side *p = pass ? b : a, *q = pass ? a : b;
        const int *ip = pass ? pb : pa, *iq = pass ? pa : pb;
        for (int k = 0; k < 2; k++) {
            const tok *x = &p->t[ip[k]];
            if (tok_like(x, &q->t[iq[0]]) || tok_like(x, &q->t[iq[1]]) ||
                syn(x, &q->t[iq[0]]) || syn(x, &q->t[iq[1]]))
                continue;
            say(why, whylen, "compares other things: \"%.*s\" only in %s", (int)x->len, x->s,
                pass ? "query" : "stored");
            return 0;
        }
    }
    return 1;
}

/* The data after a colon, as a task reads it (task_text(), quotes around it dropped), into
 * out (textlen - data_at bytes at most): what a task works on ("translate into French: he
 * is tired"). Its length; 0 when sd gives none. */
static size_t data_of(const side *sd, char *out)
{
    size_t n = task_text(sd->text + sd->data_at, sd->textlen - sd->data_at, " .!?\"'", out);
    size_t k = 0;
    while (k < n && strchr("\"'", out[k]))
        k++;
    memmove(out, out + k, n - k);
    return n - k;
}

/* "Translate into French: he is tired" vs "...: she is tired": a task's data differs in
 * any word, a pronoun or a stop word too, and so does its answer. */
static int rule_data(const side *a, const side *b, char *why, size_t whylen)
{
    if (a->data_at >= a->textlen || b->data_at >= b->textlen)
        return 1;
    /* (the whole of each: a difference at the end of a long text counts too) */
    char *x = malloc(a->textlen - a->data_at + 1), *y = malloc(b->textlen - b->data_at + 1);
    size_t nx = x ? data_of(a, x) : 0;
    size_t ny = y ? data_of(b, y) : 0;
    int same = !x || !y || !nx || !ny || (nx == ny && !memcmp(x, y, nx));
    free(x);
    free(y);
    if (same)
        return 1;
    say(why, whylen, "the text given differs");
    return 0;
}

/* "What are the planets? Just give the count.", "... Reply in all caps.", "... Be
 * concise.": an instruction added after the whole of the other question says what form
 * the answer takes, and the stored answer has another. */
static int rule_instruction(const side *a, const side *b, char *why, size_t whylen)
{
    static const char verbs[] = " just only reply respond answer be keep use give list write "
                                "format make include limit return output translate rewrite ";
    for (int pass = 0; pass < 2; pass++) {
        const side *p = pass ? b : a, *q = pass ? a : b;
        size_t n = p->textlen;
        while (n && isspace((unsigned char)p->text[n - 1]))
            n--;
        if (!n || !strchr("?.!", p->text[n - 1]) || q->textlen <= n ||
            strncasecmp(p->text, q->text, n))
            continue;
        size_t i = n;
        while (i < q->textlen && isspace((unsigned char)q->text[i]))
            i++;
        size_t w = i;
        while (w < q->textlen && isalpha((unsigned char)q->text[w]))
            w++;
        char word[16];
        if (w == i || w - i + 3 > sizeof word) continue;
        snprintf(word, sizeof word, " %.*s ", (int)(w - i), q->text + i);
        for (char *c = word; *c; c++)
            *c = (char)lower((unsigned char)*c);
        if (!strstr(verbs, word)) continue;
        say(why, whylen, "%s adds an instruction: %.*s", pass ? "stored" : "query",
            (int)(w - i), q->text + i);
        return 0;
    }
    return 1;
}

static int unit_word(const tok *t);

/* A measure in other units ("the speed of light in km/s" vs "in miles per second"): each
 * side names a unit the other does not. */
static int rule_units(const side *a, const side *b, char *why, size_t whylen)
{
    const tok *unit[2] = {NULL, NULL};
    for (int pass = 0; pass < 2; pass++) {
        const side *p = pass ? b : a, *q = pass ? a : b;
        for (int j = 0; j < p->nt && !unit[pass]; j++)
            if (unit_word(&p->t[j]) && !side_has_like(q, &p->t[j])) unit[pass] = &p->t[j];
    }
    if (!unit[0] || !unit[1]) return 1;
    say(why, whylen, "units differ: %.*s vs %.*s", (int)unit[0]->len, unit[0]->s,
        (int)unit[1]->len, unit[1]->s);
    return 0;
}

static int head_wh(const side *sd);
static int names_the_doer(const side *who, const side *other);

/* "What was the significance of the Magna Carta?" vs "Who signed the Magna Carta?": a who
 * against another question, each side with a content word of its own (where the words are
 * the same but for the question word, the close call and the swap rules judge). */
static int rule_who(const side *a, const side *b, char *why, size_t whylen)
{
    static const char *const other[] = {"what", "why", "how", "where", "when"};
    static const char *const named[] = {"whom", "vs", "versus"};
    for (int pass = 0; pass < 2; pass++) {
        const side *p = pass ? b : a, *q = pass ? a : b;
        /* (both opening so: "which artist painted it" and keywords ask a who too) */
        if (!p->nt || !q->nt || !is_word(&p->t[0], "who") || head_wh(p) != 3 ||
            SAYS_ONE_OF(p, named))
            continue; /* (nor "who" named: "who vs whom") */
        if (!ONE_OF(&q->t[0], other) || head_wh(q) == 3 || words_within(p, q) ||
            words_within(q, p) || names_the_doer(p, q))
            continue;
        say(why, whylen, "asks who vs %.*s", (int)q->t[0].len, q->t[0].s);
        return 0;
    }
    return 1;
}

/* The rules asked for over two sides already read (stored and query: the texts, for the
 * code rule). */
static int check_sides(const side *a, const side *b, const char *stored, size_t slen,
                       const char *query, size_t qlen, unsigned rules, char *why, size_t whylen)
{
    if ((rules & R_NUM) && !rule_numbers(a, b, why, whylen)) return 0;
    if ((rules & R_NEG) && !rule_negation(a, b, why, whylen)) return 0;
    if ((rules & R_CONTRAST) &&
        (!rule_contrast(a, b, why, whylen) || !rule_contrast(b, a, why, whylen) ||
         !rule_less(a, b, why, whylen) || !rule_another(a, b, why, whylen) ||
         !rule_said_again(a, b, why, whylen)))
        return 0;
    if ((rules & R_PREFIX) && !rule_prefix(a, b, why, whylen)) return 0;
    if ((rules & R_CONTRAST) && !rule_word_aspect(a, b, why, whylen)) return 0;
    if ((rules & R_ENTITY) &&
        (!rule_entities(a, b, why, whylen) || !rule_longer_name(a, b, why, whylen) ||
         !rule_name_or_thing(a, b, why, whylen) || !rule_members(a, b, why, whylen)))
        return 0;
    if ((rules & R_ORDER) && (!rule_order(a, b, why, whylen) || !rule_order(b, a, why, whylen)))
        return 0;
    if ((rules & R_WH) && (!rule_wh(a, b, why, whylen) || !rule_yes_no(a, b, why, whylen) ||
                           !rule_wh_swap(a, b, why, whylen) || !rule_who(a, b, why, whylen)))
        return 0;
    if ((rules & R_ORDER) &&
        (!rule_pronoun_roles(a, b, why, whylen) || !rule_owner_roles(a, b, why, whylen) ||
         !rule_subjects(a, b, why, whylen) || !rule_done_to_me(a, b, why, whylen) ||
         !rule_passive(a, b, why, whylen) ||
         !rule_direction(a, b, why, whylen) || !rule_between(a, b, why, whylen)))
        return 0;
    if ((rules & R_SWAP) && !rule_swap(a, b, why, whylen)) return 0;
    if ((rules & R_TIME) &&
        (!rule_time(a, b, why, whylen) || !rule_verb_tense(a, b, why, whylen) ||
         !rule_future(a, b, why, whylen) || !rule_modal(a, b, why, whylen)))
        return 0;
    if ((rules & R_SCOPE) && (!rule_scope(a, b, why, whylen) || !rule_excess(a, b, why, whylen) ||
                              !rule_whole(a, b, why, whylen) || !rule_rate(a, b, why, whylen) ||
                              !rule_superlative(a, b, why, whylen)))
        return 0;
    if ((rules & R_ENTITY) &&
        (!rule_case(a, b, why, whylen) || !rule_spelling(a, b, why, whylen) ||
         !rule_quoted_spaces(a, b, why, whylen) || !rule_quoted_text(a, b, why, whylen) ||
         !rule_brackets(a, b, why, whylen)))
        return 0;
    if ((rules & R_ADD) &&
        (!rule_added(a, b, why, whylen) || !rule_inserted(a, b, why, whylen)))
        return 0;
    if ((rules & R_OP) && (!rule_operation(a, b, why, whylen) || !rule_units(a, b, why, whylen)))
        return 0;
    if ((rules & R_ENTITY) &&
        (!rule_data(a, b, why, whylen) || !rule_instruction(a, b, why, whylen)))
        return 0;
    if ((rules & R_CODE) && !rule_code(stored ? stored : "", stored ? slen : 0,
                                       query ? query : "", query ? qlen : 0, why, whylen))
        return 0;
    if ((rules & R_ENTITY) && !rule_signs(a, b, why, whylen)) return 0;
    say(why, whylen, "%s", "");
    return 1;
}

/* The guard with a choice of rules; the benchmark driver measures each one. */
static int guard_check(const char *stored, size_t slen, const char *query, size_t qlen,
                       unsigned rules, char *why, size_t whylen)
{
    side a, b;
    return read_pair(&a, &b, stored, slen, query, qlen, why, whylen) &&
           check_sides(&a, &b, stored, slen, query, qlen, rules, why, whylen);
}

int gw_guard_compatible(const char *stored, size_t slen, const char *query, size_t qlen, char *why,
                        size_t whylen)
{
    return guard_check(stored, slen, query, qlen, R_ALL, why, whylen);
}

int gw_guard_code_compatible(const char *stored, size_t slen, const char *query, size_t qlen,
                             char *why, size_t whylen)
{
    say(why, whylen, "%s", "");
    return rule_code(stored ? stored : "", stored ? slen : 0, query ? query : "",
                     query ? qlen : 0, why, whylen);
}

/* ------------------------------------------------------------------ close calls */

/* The question word a side opens with, when it asks for an answer of a kind of its own
 * (1 where, 2 when, 3 who, 4 why), else 0: "how do I", "what is" and a request ask nothing
 * so particular, but "what year" or "what time" asks a when. Two words of phrasing may
 * come first ("so where", "at what time"). */
static int head_wh(const side *sd)
{
    int i = 0;
    while (i < 2 && i < sd->nt && (sd->t[i].flags & F_STOP) && !(sd->t[i].flags & F_WH) &&
           !is_word(&sd->t[i], "what") && !is_word(&sd->t[i], "which"))
        i++;
    if (i >= sd->nt || !(sd->t[i].flags & F_STOP)) { /* "the WHERE clause" */
        /* "puppy shots - at what age?": a when asked after the words it is of; "WWII end
         * date", words with no question word that ask for a date */
        if (late_when(sd, i + 1, 0)) return 2;
        for (int j = i + 1; j < sd->nt; j++)
            if (is_word(&sd->t[j], "date") && asks_a_when(sd, j) &&
                !(sd->t[j - 1].flags & F_STOP) && !is_word(&sd->t[j - 1], "current") &&
                !is_word(&sd->t[j - 1], "today") && !is_word(&sd->t[j - 1], "system"))
                return 2; /* (not "the current date", a value) */
        return 0;
    }
    const tok *t = &sd->t[i];
    /* "how old do you have to be", "how old should a puppy be": at what age, a when; not
     * "how old is the Eiffel Tower", an age */
    if (is_word(t, "how") && i + 2 < sd->nt && is_word(&sd->t[i + 1], "old") &&
        !is_word(&sd->t[i + 2], "is") && !is_word(&sd->t[i + 2], "was") &&
        !is_word(&sd->t[i + 2], "are") && !is_word(&sd->t[i + 2], "were"))
        return 2;
    /* "what year", "what's the best time": a when */
    if (is_word(t, "what") || is_word(t, "which"))
        for (int j = i + 1; j < sd->nt && j <= i + 4; j++)
            if (asks_a_when(sd, j)) return 2;
    /* "where can I track my refund" asks how to, as "how do I check my refund" does */
    if (is_word(t, "where") && i + 3 < sd->nt &&
        (is_word(&sd->t[i + 1], "can") || is_word(&sd->t[i + 1], "do")) &&
        (is_word(&sd->t[i + 2], "i") || is_word(&sd->t[i + 2], "you"))) {
        static const char *const how[] = {"find", "get", "buy", "track", "check", "download",
                                          "watch", "stream", "report", "apply", "renew",
                                          "order", "sell", "purchase"};
        if (ONE_OF(&sd->t[i + 3], how)) return 0;
    }
    if (is_word(t, "where")) return 1;
    if (is_word(t, "when")) return 2;
    if (is_word(t, "who") || is_word(t, "whom") || is_word(t, "whose")) return 3;
    return is_word(t, "why") ? 4 : 0;
}

static int unit_word(const tok *t)
{
    return word_is(t, K_UNIT) || lex_has(lex_find(t->n, t->nlen), K_UNIT);
}

/* Whether `other` names as a noun the doer that `who` asks for: "who won the cup" and
 * "the cup's winner", "who wrote it" and "its author". */
static int names_the_doer(const side *who, const side *other)
{
    int i = 0;
    while (i < who->nt && !is_word(&who->t[i], "who"))
        i++;
    while (++i < who->nt && (who->t[i].flags & F_STOP))
        ;
    if (i >= who->nt) return 0;
    const tok *v = &who->t[i];
    for (int j = 0; j < other->nt; j++) {
        const tok *n = &other->t[j];
        if ((n->flags & F_STOP) || n->nlen < 5) continue;
        int doer = !memcmp(n->n + n->nlen - 2, "er", 2) || !memcmp(n->n + n->nlen - 2, "or", 2);
        if ((doer && tok_like(n, v)) || syn(n, v)) return 1;
    }
    return 0;
}

/* Whether sd writes a temperature with its degree sign ("100°F"): "degrees" is said. */
static int says_degrees(const side *sd)
{
    for (size_t k = 0; k + 1 < sd->textlen; k++)
        if ((unsigned char)sd->text[k] == 0xc2 && (unsigned char)sd->text[k + 1] == 0xb0)
            return 1;
    return 0;
}

/* Whether q's token j is the motion a "how fast" or "how far" implies: "how fast does
 * light travel" asks the speed of light. */
static int moves_how_fast(const side *q, int j)
{
    static const char *const w[] = {"travel", "move", "go", "run", "fly", "spin"};
    int motion = 0, how = 0;
    for (size_t k = 0; k < sizeof w / sizeof *w; k++)
        motion |= is_word(&q->t[j], w[k]) || (q->t[j].lem && q->t[j].lemlen == strlen(w[k]) &&
                                              !memcmp(q->t[j].lem, w[k], q->t[j].lemlen));
    for (int i = 0; motion && i + 1 < q->nt; i++)
        how |= is_word(&q->t[i], "how") &&
               (is_word(&q->t[i + 1], "fast") || is_word(&q->t[i + 1], "far") ||
                is_word(&q->t[i + 1], "quickly"));
    return how;
}

/* The close call over two sides already read. */
static int close_call_sides(const side *a, const side *b, char *why, size_t whylen)
{
    static const char *const asks[] = {"", "where", "when", "who", "why"};
    /* one side says all the other does and more: the more narrows it, whatever it is */
    for (int pass = 0; pass < 2; pass++) {
        const side *p = pass ? b : a, *q = pass ? a : b;
        if (!words_within(p, q)) continue;
        for (int j = 0; j < q->nt; j++)
            if (added_word(p, q, j) && !word_is(&q->t[j], K_REPHRASE) &&
                !((is_word(&q->t[j], "degrees") || is_word(&q->t[j], "degree")) &&
                  says_degrees(p)) &&
                !singular_is(&q->t[j], K_CLASS) && !moves_how_fast(q, j) &&
                !(head_wh(p) == 2 && head_wh(q) % 2 == 0 && asks_a_when(q, j))) {
                say(why, whylen, "close call: %s adds \"%.*s\"", pass ? "stored" : "query",
                    (int)q->t[j].len, q->t[j].s);
                return 0;
            }
    }
    /* "where do pandas live" vs "what do pandas eat"; a why may be asked as a what
     * ("why do onions make you cry" vs "what makes people tear up") */
    int x = head_wh(a), y = head_wh(b);
    if (x != y && !((x == 4 || y == 4) && (x == 0 || y == 0)) &&
        !(x == 3 && y == 0 && names_the_doer(a, b)) &&
        !(y == 3 && x == 0 && names_the_doer(b, a))) {
        say(why, whylen, "close call: asks %s vs %s", x ? asks[x] : "what", y ? asks[y] : "what");
        return 0;
    }
    return 1;
}

int gw_guard_close_call(const char *stored, size_t slen, const char *query, size_t qlen,
                        char *why, size_t whylen)
{
    side a, b;
    return read_pair(&a, &b, stored, slen, query, qlen, why, whylen) &&
           close_call_sides(&a, &b, why, whylen);
}

/* The persons a side names, as bits: I, me, my, you, your, we, us, our, they, them. */
static unsigned persons(const side *sd)
{
    static const char *const p[] = {"i",   "me", "my",  "you",  "your", "we",
                                    "our", "us", "they", "them", "u",   "ur"};
    static const unsigned bit[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 8, 16};
    unsigned bits = 0;
    for (int i = 0; i < sd->nt; i++)
        for (size_t k = 0; k < sizeof p / sizeof *p; k++)
            if (is_word(&sd->t[i], p[k]) && !(sd->t[i].flags & F_ACRO)) bits |= bit[k];
    return bits;
}

int gw_guard_same_words(const char *stored, size_t slen, const char *query, size_t qlen)
{
    char why[8];
    side a, b;
    if (!read_pair(&a, &b, stored, slen, query, qlen, why, sizeof why) ||
        !check_sides(&a, &b, stored, slen, query, qlen, R_ALL, why, sizeof why) ||
        !close_call_sides(&a, &b, why, sizeof why))
        return 0;
    /* (and the same persons: "how do I block someone" is not "how do I know if someone
     * blocked me") */
    return words_within(&a, &b) && words_within(&b, &a) && asked(&a) == asked(&b) &&
           persons(&a) == persons(&b);
}

/* ------------------------------------------------------------------ templates */

/* A sentence or line ends at t[i]: a line break, or . ? ! before white space or the end. */
static int ends_sentence(const char *t, size_t len, size_t i)
{
    if (t[i] == '\n')
        return 1;
    return (t[i] == '.' || t[i] == '?' || t[i] == '!') &&
           (i + 1 == len || t[i + 1] == ' ' || t[i + 1] == '\t' || t[i + 1] == '\n' ||
            t[i + 1] == '\r');
}

/* Whether t[from, to), text one side adds, is whole sentences: it starts where one ends
 * (or the text does) and ends with a sentence's mark (or the text's end). */
static int added_sentences(const char *t, size_t tlen, size_t from, size_t to)
{
    size_t k = from, j = to;
    while (k > 0 && (t[k - 1] == ' ' || t[k - 1] == '\t' || t[k - 1] == '\r'))
        k--;
    while (j > from && isspace((unsigned char)t[j - 1]))
        j--;
    int starts = k == 0 || t[k - 1] == '\n' || ends_sentence(t, tlen, k - 1);
    int ends = j == from || to == tlen || t[j - 1] == '\n' || ends_sentence(t, tlen, j - 1);
    return starts && ends;
}

enum { CORE_SENTENCES = 128 }; /* sentences of a span read for shared ones, at most */

/* The sentences of t[off, end), each from its first non-blank byte to the mark that ends
 * it, into from/len; their count, or -1 past CORE_SENTENCES. */
static int split_sentences(const char *t, size_t tlen, size_t off, size_t end, size_t *from,
                           size_t *len)
{
    int n = 0;
    size_t i = off;
    for (;;) {
        while (i < end && (t[i] == ' ' || t[i] == '\t' || t[i] == '\r' || t[i] == '\n'))
            i++;
        if (i >= end)
            return n;
        if (n == CORE_SENTENCES)
            return -1;
        size_t st = i;
        while (i + 1 < end && !ends_sentence(t, tlen, i))
            i++;
        from[n] = st;
        len[n++] = ++i - st;
    }
}

/* Copies into *dst (malloc'd) the sentences of t not marked shared, a space between two;
 * with none shared, the span as it is. */
static int join_sentences(const char *t, size_t off, size_t end, const size_t *from,
                          const size_t *len, const unsigned char *shared, int n, int any,
                          char **dst, size_t *dlen)
{
    char *o = malloc(end - off + (size_t)(n > 0 ? n : 0) + 1); /* the spaces too */
    if (!o)
        return -1;
    size_t m = 0;
    if (!any) {
        memcpy(o, t + off, end - off);
        m = end - off;
    } else
        for (int k = 0; k < n; k++) {
            if (shared[k])
                continue;
            if (m)
                o[m++] = ' ';
            memcpy(o + m, t + from[k], len[k]);
            m += len[k];
        }
    o[m] = 0;
    *dst = o;
    *dlen = m;
    return 0;
}

/* Fills c->a, c->b with the sentences of the spans c gives that the other span lacks (a
 * longest common sequence of sentences taken out), and *inside with the bytes taken out of
 * a's. 0, or -1 out of memory. */
static int differing_sentences(const char *a, size_t alen, const char *b, size_t blen,
                               struct gw_core *c, size_t *inside)
{
    enum { N = CORE_SENTENCES };
    size_t af[N], al[N], bf[N], bl[N];
    unsigned char as[N] = {0}, bs[N] = {0};
    int na = split_sentences(a, alen, c->aoff, c->aoff + c->alen, af, al);
    int nb = split_sentences(b, blen, c->boff, c->boff + c->blen, bf, bl);
    int any = 0;
    *inside = 0;
    if (na > 1 && nb > 1) {
        /* lcs[i][j]: the longest common sequence of a's sentences from i and b's from j */
        unsigned char(*lcs)[N + 1] = calloc(N + 1, sizeof *lcs);
        if (!lcs)
            return -1;
        for (int i = na - 1; i >= 0; i--)
            for (int j = nb - 1; j >= 0; j--)
                lcs[i][j] = al[i] == bl[j] && !memcmp(a + af[i], b + bf[j], al[i])
                                ? (unsigned char)(lcs[i + 1][j + 1] + 1)
                            : lcs[i + 1][j] > lcs[i][j + 1] ? lcs[i + 1][j]
                                                             : lcs[i][j + 1];
        for (int i = 0, j = 0; i < na && j < nb;) {
            if (al[i] == bl[j] && !memcmp(a + af[i], b + bf[j], al[i])) {
                as[i] = bs[j] = 1;
                *inside += al[i];
                any = 1;
                i++, j++;
            } else if (lcs[i + 1][j] >= lcs[i][j + 1])
                i++;
            else
                j++;
        }
        free(lcs);
        /* a question both ask after context that differs: "the launch was delayed ...
         * Question: what happened?" vs "... cancelled ..." */
        int differed = 0;
        for (int j = 0; j < nb && !c->asked_after; j++) {
            differed |= !bs[j];
            c->asked_after = differed && bs[j] && memchr(b + bf[j], '?', bl[j]);
        }
    }
    if (join_sentences(a, c->aoff, c->aoff + c->alen, af, al, as, na, any, &c->a, &c->an) ||
        join_sentences(b, c->boff, c->boff + c->blen, bf, bl, bs, nb, any, &c->b, &c->bn))
        return -1;
    return 0;
}

int gw_guard_core(const char *a, size_t alen, const char *b, size_t blen, struct gw_core *out)
{
    size_t p = 0, s = 0, shorter = alen < blen ? alen : blen;
    while (p < shorter && a[p] == b[p])
        p++;
    while (s < shorter - p && a[alen - 1 - s] == b[blen - 1 - s])
        s++;
    if (p == shorter && alen == blen)
        return 0; /* the same text */
    /* one text adds sentences to the other (what differs is nothing, or white space, on
     * one side, and whole sentences on the other): compared whole; words added inside a
     * sentence ("We are no longer on track") are compared in it */
    for (int side = 0; side < 2; side++) {
        const char *t = side ? b : a, *o = side ? a : b;
        size_t end = (side ? blen : alen) - s, i = p, olen = side ? alen : blen;
        while (i < end && (t[i] == ' ' || t[i] == '\t' || t[i] == '\r' || t[i] == '\n'))
            i++;
        if (i == end && added_sentences(o, olen, p, olen - s))
            return 0;
    }
    /* back to the start of the sentence the first difference is in (both texts agree up
     * to p, but what follows a '.' there may not) */
    size_t start = p;
    while (start > 0 && !(ends_sentence(a, alen, start - 1) && ends_sentence(b, blen, start - 1)))
        start--;
    /* and past a label both share ("Question: ", "Query: "): the question word comes first */
    for (size_t i = start; i + 1 < p; i++)
        if (a[i] == ':' && (a[i + 1] == ' ' || a[i + 1] == '\t'))
            start = i + 1;
    while (start < p && (a[start] == ' ' || a[start] == '\t' || a[start] == '\r' ||
                         a[start] == '\n'))
        start++;
    /* on to the end of the sentence the last difference is in: the same place in the
     * suffix both share */
    size_t k = 0;
    while (k < s && !(ends_sentence(a, alen, alen - s + k) && ends_sentence(b, blen, blen - s + k)))
        k++;
    size_t tail = k < s ? s - k - 1 : 0; /* shared bytes after the sentences */
    size_t aend = alen - tail, bend = blen - tail;
    *out = (struct gw_core){start, aend - start, start, bend - start, NULL, NULL, 0, 0, 0};
    size_t inside = 0;
    if (differing_sentences(a, alen, b, blen, out, &inside) || !out->an || !out->bn) {
        gw_guard_core_free(out); /* out of memory, or one adds sentences to the other */
        return 0;
    }
    size_t outside = start + tail + inside, span = out->an > out->bn ? out->an : out->bn;
    /* a template: sentences shared around the question, at least as long as it */
    if (outside < 40 || outside < span) {
        gw_guard_core_free(out);
        return 0;
    }
    return 1;
}

void gw_guard_core_free(struct gw_core *c)
{
    free(c->a);
    free(c->b);
    c->a = c->b = NULL;
}
